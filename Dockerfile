# Multi-stage build: a static binary on a minimal, non-root image.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/bulleted-mcp ./cmd/bulleted-mcp

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/bulleted-mcp /bulleted-mcp
USER nonroot:nonroot
ENV BULLETED_MCP_STORE=/home/nonroot/store
ENTRYPOINT ["/bulleted-mcp"]
CMD ["serve"]
