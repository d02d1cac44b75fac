#!/bin/sh
# Register bulleted-mcp with Claude Code (stdio, embedded repository).
claude mcp add bulleted -- bulleted-mcp serve
