// Confirmation of big destructive edits with the official MCP TypeScript
// SDK client: a client that declares elicitation is asked before a delete
// of more than 20 bullets; accept writes it, decline / cancel / no answer
// (BULLETED_CONFIRM_TIMEOUT) write nothing and answer kind `declined`; a
// client without the capability is not asked (unchanged behaviour).
//
// Usage: node confirm.mjs BINARY STORE_DIR
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js'

const [bin, store] = process.argv.slice(2)
const fail = (msg) => {
  console.error('FAIL ' + msg)
  process.exit(1)
}
const check = (cond, msg) => cond || fail(msg)

const connect = async (answer) => {
  const transport = new StdioClientTransport({ command: bin, args: ['serve', '--store', store], env: { ...process.env, BULLETED_CONFIRM_TIMEOUT: '2s' }, stderr: 'inherit' })
  const caps = answer ? { elicitation: {} } : {}
  const client = new Client({ name: 'confirm-e2e', version: '1.0.0' }, { capabilities: caps })
  const asked = []
  if (answer) {
    client.setRequestHandler(ElicitRequestSchema, async (req) => {
      asked.push(req.params.message)
      if (answer === 'never') return new Promise(() => {})
      return { action: answer }
    })
  }
  await client.connect(transport)
  return { client, asked }
}
const call = (c, name, args) => c.callTool({ name, arguments: args }, undefined, { timeout: 60_000 })
const count = async (c) => {
  const r = await call(c, 'read_outline', { depth: 5, format: 'json', flat: true, limit: 5000 })
  return r.structuredContent.nodes.length
}

const steps = {}
const seed = await connect(null)
const made = []
for (const answer of ['decline', 'cancel', 'never', 'accept', null]) {
  const r = await call(seed.client, 'insert_after', { nodes: [{ text: `Section ${answer}`, children: Array.from({ length: 30 }, (_, i) => ({ text: `item ${i}` })) }] })
  check(!r.isError, `seed: ${r.content?.[0]?.text}`)
  const sc = r.structuredContent
  made.push([answer, sc.created?.[0]?.rkey ?? sc.keys?.[0]])
}
await seed.client.close()

for (const [answer, key] of made) {
  const { client, asked } = await connect(answer)
  const before = await count(client)
  const r = await call(client, 'delete_node', { node: key, children: 'subtree' })
  const after = await count(client)
  const kind = r.structuredContent?.error?.kind
  if (answer === 'accept' || answer === null) {
    check(!r.isError, `${answer}: ${r.content?.[0]?.text}`)
    check(after === before - 31, `${answer}: ${before} → ${after} bullets, want 31 fewer`)
  } else {
    check(r.isError && kind === 'declined', `${answer}: kind ${kind}: ${r.content?.[0]?.text}`)
    check(after === before, `${answer}: ${before} → ${after} bullets: something was written`)
  }
  check(asked.length === (answer ? 1 : 0), `${answer}: asked ${asked.length} time(s)`)
  if (answer) check(/31/.test(asked[0]), `${answer}: the question does not give the count: ${asked[0]}`)
  steps[answer ?? 'no capability'] = `${r.isError ? kind : 'written'}, asked ${asked.length}`
  await client.close()
}
console.log('OK ' + JSON.stringify(steps))
