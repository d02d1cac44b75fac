// Subscriptions with the official MCP TypeScript SDK client: a session
// subscribes to one bullet's subtree (resources/subscribe) and gets exactly
// one notifications/resources/updated per commit that touches that subtree
// (its own writes, another session's, another process's on the same data
// directory) and none for commits elsewhere.
//
// Usage: node subscribe.mjs BINARY STORE_DIR
// Exits 0 and prints `OK {...}` when every check passed.
import { spawnSync } from 'node:child_process'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import { ResourceUpdatedNotificationSchema } from '@modelcontextprotocol/sdk/types.js'

const [bin, store] = process.argv.slice(2)
const fail = (msg) => {
  console.error('FAIL ' + msg)
  process.exit(1)
}
const check = (cond, msg) => cond || fail(msg)
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

const connect = async (name) => {
  const transport = new StdioClientTransport({ command: bin, args: ['serve', '--store', store], env: process.env, stderr: 'inherit' })
  const client = new Client({ name, version: '1.0.0' })
  await client.connect(transport)
  return client
}
const call = async (client, name, args) => {
  const res = await client.callTool({ name, arguments: args })
  if (res.isError) fail(`${name} ${JSON.stringify(args)}: ${res.content?.[0]?.text}`)
  return res
}

const a = await connect('subscriber')
const b = await connect('other-session')

const ins = await call(a, 'insert_after', { nodes: [{ text: 'Watched', children: [{ text: 'first child' }] }, { text: 'Elsewhere' }] })
const [watched, child, elsewhere] = ins.structuredContent.created.map((c) => c.rkey)
const uri = `bulleted://outline/${watched}`

const updates = []
a.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => updates.push(n.params.uri))
await a.subscribeResource({ uri })

// waitFor: the count of updates once n arrived (or after a quiet while)
const settle = async (n) => {
  for (let i = 0; i < 50 && updates.length < n; i++) await sleep(100)
  await sleep(300) // and nothing more comes
  return updates.length
}
const steps = []
const expect = async (what, n, act) => {
  const before = updates.length
  await act()
  const got = (await settle(before + n)) - before
  steps.push(`${what}: ${got}`)
  check(got === n, `${what}: ${got} update(s), want ${n} (${JSON.stringify(updates.slice(before))})`)
  check(updates.slice(before).every((u) => u === uri), `${what}: an update for another URI: ${JSON.stringify(updates.slice(before))}`)
}

// the subscriber's own writes
await expect('insert under the subtree', 1, () => call(a, 'insert_after', { parent: watched, text: 'second child' }))
await expect('edit in the subtree', 1, () => call(a, 'update_node', { node: child, text: 'first child, edited' }))
await expect('insert elsewhere', 0, () => call(a, 'insert_after', { parent: elsewhere, text: 'not watched' }))
await expect('read only', 0, () => call(a, 'read_outline', { node: watched }))
// another server process on the same directory (b): seen by a's server at
// its next look
await expect('another server\'s write under the subtree, then a read', 1, async () => {
  await call(b, 'insert_after', { parent: watched, text: 'from the other server' })
  await call(a, 'read_outline', { node: elsewhere })
})
await expect('another server\'s write elsewhere, then a read', 0, async () => {
  await call(b, 'update_node', { node: elsewhere, text: 'Elsewhere, renamed' })
  await call(a, 'read_outline', { node: elsewhere })
})
// a shell's `call` on the same directory
await expect('a shell call under the subtree, then a read', 1, async () => {
  const u = spawnSync(bin, ['call', '--store', store, 'update_node', JSON.stringify({ node: child, text: 'first child, from the shell' })], { encoding: 'utf8' })
  if (u.status !== 0) fail(`call update_node: ${u.stdout}${u.stderr}`)
  await call(a, 'read_outline', { node: elsewhere })
})
await expect('delete in the subtree', 1, () => call(a, 'delete_node', { node: child }))
await a.unsubscribeResource({ uri })
await expect('after unsubscribe', 0, () => call(a, 'insert_after', { parent: watched, text: 'unheard' }))

await a.close()
await b.close()
console.log('OK ' + JSON.stringify({ steps }))
