// Package tools defines the MCP tools: their names, schemas, annotations and
// thin handlers that parse arguments, call the outline engine and shape the
// result (structured content plus a one-paragraph summary). Errors the model
// can fix come back as tool results with isError and a next step.
package tools
