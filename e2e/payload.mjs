// One payload per result (issue #25, serve --payload) with the official MCP
// TypeScript SDK client, which checks structuredContent against the tool's
// outputSchema and refuses a result without it when the tool declares one.
// The client names itself NAME; MODE is the mode the server must give it
// (structured, both or text). On a demo outline it lists the tools and
// calls search and read_outline: structured: the structured content is
// there (validated by the SDK), the text short with the rows in the
// structured content; both: the text the full rendering; text: no output
// schema, no structured content, the text the full rendering.
//
// Usage: node payload.mjs NAME MODE BINARY [serve flags...]
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'

const [name, mode, bin, ...serveArgs] = process.argv.slice(2)
const fail = (msg) => {
  console.error('FAIL ' + msg)
  process.exit(1)
}
const check = (cond, msg) => cond || fail(msg)

const transport = new StdioClientTransport({ command: bin, args: ['serve', ...serveArgs], env: process.env, stderr: 'inherit' })
const client = new Client({ name, version: '1.0.0' })
await client.connect(transport)
const instr = client.getInstructions() || ''
check(instr.includes(`Payload: ${mode} (`), `the instructions do not say ${mode}: ${instr.slice(-300)}`)

const { tools } = await client.listTools()
const withSchema = tools.filter((t) => t.outputSchema).length
check(mode === 'text' ? withSchema === 0 : withSchema === tools.length, `${withSchema} of ${tools.length} tools declare an output schema in mode ${mode}`)

const textOf = (res) => res.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n')
// enough bullets that a result's full text is longer than its short rendering
const found = await client.callTool({ name: 'search', arguments: { text: 'buy milk', limit: 100 } })
if (!found.isError && !/milk 39/.test(textOf(found)) && !/milk 39/.test(JSON.stringify(found.structuredContent ?? ''))) {
  const nodes = Array.from({ length: 40 }, (_, i) => ({ text: `buy milk ${i}`, layout: 'todo' }))
  const ins = await client.callTool({ name: 'insert_after', arguments: { nodes } })
  check(!ins.isError, `insert: ${textOf(ins)}`)
}
const marker = 'the rows are in the structured content'
const figures = {}
for (const [tool, args] of [
  ['search', { text: 'milk' }],
  ['read_outline', { depth: 3 }],
  ['read_outline', { depth: 3, format: 'json' }],
]) {
  const res = await client.callTool({ name: tool, arguments: args })
  check(!res.isError, `${tool}: ${textOf(res)}`)
  const text = textOf(res)
  const sc = res.structuredContent
  const key = `${tool}${args.format ? ' json' : ''}`
  figures[key] = { text: text.length, structured: sc ? JSON.stringify(sc).length : 0 }
  if (mode === 'text') {
    check(sc === undefined, `${key}: structured content in text mode`)
    check(!text.includes(marker) && text.length > 100, `${key}: the text is not the full rendering: ${text}`)
  } else {
    check(sc && sc.did, `${key}: no structured content`)
    if (mode === 'structured') {
      check(text.includes(marker) && text.length < JSON.stringify(sc).length, `${key}: the text is not a short rendering: ${text}`)
    } else {
      check(!text.includes(marker), `${key}: a short text in mode both: ${text}`)
    }
  }
}
await client.close()
console.log('OK ' + JSON.stringify({ name, mode, figures }))
