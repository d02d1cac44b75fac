# Multi-stage build: a static binary on a minimal, non-root image.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# the release's version (docker build --build-arg VERSION=0.9.0), printed by
# `bulleted-mcp version` and sent as serverInfo; empty: the build's own
ARG VERSION=""
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w -X main.version=${VERSION}" -o /out/bulleted-mcp ./cmd/bulleted-mcp
# the store's directory, made here (the final image has no shell) so that it
# exists in the image owned by nonroot: a volume mounted on it (named or
# anonymous) starts as a copy of it, writable by the server
RUN mkdir -p /out/store

FROM gcr.io/distroless/static-debian12:nonroot
# the MCP registry checks this label against server.json's name (ownership)
LABEL io.modelcontextprotocol.server.name="io.github.bulleted-mcp/bulleted-mcp"
COPY --from=build /out/bulleted-mcp /bulleted-mcp
COPY --from=build --chown=65532:65532 /out/store /home/nonroot/store
USER nonroot:nonroot
# the embedded store's data directory (serve --store, env BULLETED_MCP_STORE):
# the repository, the operations and the undo journal live here, so it is a
# volume; without one mounted (docker run -v bulleted-mcp:/home/nonroot/store)
# each container starts on an empty outline
ENV BULLETED_MCP_STORE=/home/nonroot/store
VOLUME ["/home/nonroot/store"]
ENTRYPOINT ["/bulleted-mcp"]
CMD ["serve"]
