// MCP Apps capability negotiation through the official MCP TypeScript SDK
// client (and the official ext-apps helpers' names for the extension and
// its MIME type): a client that declares io.modelcontextprotocol/ui with
// text/html;profile=mcp-app gets each view-bearing tool's
// _meta.ui.resourceUri, a client that does not gets no _meta on any tool;
// both see the server declare the extension, every tool's title, and the
// ui:// views listed. Over stdio (one server per client), and over
// `serve --http` with both clients on one server at once (the links
// follow each session's own declaration).
//
// Usage: node negotiate.mjs BINARY STORE
// Prints `OK {...}` when every check passed.
import { spawn } from 'node:child_process'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { EXTENSION_ID, RESOURCE_MIME_TYPE, RESOURCE_URI_META_KEY } from '@modelcontextprotocol/ext-apps/server'

const [bin, store] = process.argv.slice(2)
let srv
const fail = (msg) => {
  console.error('FAIL ' + msg)
  srv?.kill()
  process.exit(1)
}
const check = (cond, msg) => cond || fail(msg)

const declared = { extensions: { [EXTENSION_ID]: { mimeTypes: [RESOURCE_MIME_TYPE] } } }
const views = { read_outline: 'ui://bulleted/outline.html', search: 'ui://bulleted/outline.html', apply_batch: 'ui://bulleted/diff.html', insert_after: 'ui://bulleted/diff.html', undo: 'ui://bulleted/diff.html' }

// checks what one client negotiated; returns the number of linked tools
const negotiated = async (client, what, linked) => {
  const caps = client.getServerCapabilities()
  const ui = caps?.extensions?.[EXTENSION_ID]
  check(Array.isArray(ui?.mimeTypes) && ui.mimeTypes.includes(RESOURCE_MIME_TYPE), `${what}: the server does not declare ${EXTENSION_ID} with ${RESOURCE_MIME_TYPE}: ${JSON.stringify(caps)}`)
  const { tools } = await client.listTools()
  check(tools.length >= 18, `${what}: ${tools.length} tools`)
  let links = 0
  for (const t of tools) {
    check(typeof t.title === 'string' && t.title !== '' && t.annotations?.title === t.title, `${what}: ${t.name} title ${JSON.stringify(t.title)}, annotations.title ${JSON.stringify(t.annotations?.title)}`)
    check(t._meta?.[RESOURCE_URI_META_KEY] === undefined, `${what}: ${t.name} sends the deprecated flat ${RESOURCE_URI_META_KEY}`)
    const uri = t._meta?.ui?.resourceUri
    if (!linked) {
      check(t._meta === undefined, `${what}: ${t.name} has _meta ${JSON.stringify(t._meta)} for a client without the extension`)
      continue
    }
    const want = views[t.name] ?? (t.annotations.readOnlyHint ? undefined : 'ui://bulleted/diff.html')
    check(uri === want, `${what}: ${t.name} links ${uri}, want ${want}`)
    if (uri) links++
  }
  if (linked) check(links >= 10, `${what}: ${links} tools link a view`)
  const { resources } = await client.listResources()
  for (const uri of ['ui://bulleted/outline.html', 'ui://bulleted/diff.html']) {
    check(resources.some((r) => r.uri === uri && r.mimeType === RESOURCE_MIME_TYPE), `${what}: ${uri} not listed`)
  }
  return links
}

const figures = {}
// over stdio: a server per client
for (const [name, caps, linked] of [['stdio, declared', declared, true], ['stdio, not declared', {}, false]]) {
  const client = new Client({ name: 'bulleted-e2e-negotiate', version: '1.0.0' }, { capabilities: caps })
  await client.connect(new StdioClientTransport({ command: bin, args: ['serve', '--store', store + '/' + (linked ? 'a' : 'b')], env: process.env, stderr: 'inherit' }))
  figures[name] = await negotiated(client, name, linked)
  await client.close()
}

// over HTTP: one server, both clients at once, interleaved
srv = spawn(bin, ['serve', '--http', '127.0.0.1:0', '--store', store + '/http'], { env: process.env, stdio: ['ignore', 'inherit', 'pipe'] })
srv.on('exit', (c) => fail('the server exited: ' + c))
const origin = await new Promise((resolve) => {
  let buf = ''
  srv.stderr.on('data', (d) => {
    process.stderr.write(d)
    buf += d
    const m = /on http:\/\/([\d.:]+)\/mcp/.exec(buf)
    if (m) resolve('http://' + m[1])
  })
})
const connect = async (caps) => {
  const c = new Client({ name: 'bulleted-e2e-negotiate', version: '1.0.0' }, { capabilities: caps })
  await c.connect(new StreamableHTTPClientTransport(new URL(origin + '/mcp')))
  return c
}
const [a, b] = await Promise.all([connect(declared), connect({})])
for (let i = 0; i < 2; i++) {
  const [la, lb] = await Promise.all([negotiated(a, 'http session, declared', true), negotiated(b, 'http session, not declared', false)])
  figures['http, declared'] = la
  figures['http, not declared'] = lb
}
await a.close()
await b.close()
srv.removeAllListeners('exit')
srv.kill()
console.log('OK ' + JSON.stringify({ linked: figures }))
process.exit(0)
