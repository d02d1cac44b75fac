// Subscriptions with the official MCP TypeScript SDK client: a session
// subscribes to one bullet's subtree (resources/subscribe) and gets exactly
// one notifications/resources/updated per commit that touches that subtree
// (its own writes, another session's, another process's on the same data
// directory) and none for commits elsewhere.
//
// Usage: node subscribe.mjs BINARY STORE_DIR [serve flags for a PDS...]
// With a PDS (SUBSCRIBE_PDS, SUBSCRIBE_HANDLE and SUBSCRIBE_PASSWORD set):
// a person's app writes records directly (createRecord, putRecord,
// deleteRecord); with SUBSCRIBE_FOLLOW=1 each update must arrive without
// any tool call (the server follows the repository), and SUBSCRIBE_EDITS=N
// more direct creates give the latency from the PDS's answer to the
// update (median and p99).
// Exits 0 and prints `OK {...}` when every check passed.
import { spawnSync } from 'node:child_process'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import { ResourceUpdatedNotificationSchema } from '@modelcontextprotocol/sdk/types.js'

const [bin, store, ...serveArgs] = process.argv.slice(2)
const fail = (msg) => {
  console.error('FAIL ' + msg)
  process.exit(1)
}
const check = (cond, msg) => cond || fail(msg)
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

const connect = async (name) => {
  const transport = new StdioClientTransport({ command: bin, args: ['serve', '--store', store, ...serveArgs], env: process.env, stderr: 'inherit' })
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
const pds = process.env.SUBSCRIBE_PDS
const b = pds ? null : await connect('other-session')

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

// direct writes by the person's app, straight to the PDS (not through
// this server): heard without a call when following, else at the next read
let latency
async function direct(a) {
  const xrpc = async (nsid, body, token) => {
    const r = await fetch(`${pds}/xrpc/${nsid}`, { method: 'POST', headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) }, body: JSON.stringify(body) })
    const j = await r.json()
    if (!r.ok) fail(`${nsid}: ${r.status} ${JSON.stringify(j)}`)
    return j
  }
  const sess = await xrpc('com.atproto.server.createSession', { identifier: process.env.SUBSCRIBE_HANDLE, password: process.env.SUBSCRIBE_PASSWORD })
  const did = sess.did
  const follow = process.env.SUBSCRIBE_FOLLOW === '1'
  const look = follow ? async () => {} : () => call(a, 'read_outline', { node: elsewhere })
  const node = (text, parent, sortKey) => ({ $type: 'app.bulleted.node', text, parent: `at://${did}/app.bulleted.node/${parent}`, sortKey, createdAt: new Date().toISOString() })
  let made
  await expect('the app creates under the subtree', 1, async () => {
    made = await xrpc('com.atproto.repo.createRecord', { repo: did, collection: 'app.bulleted.node', record: node('from the app', watched, 'zz') }, sess.accessJwt)
    await look()
  })
  const key = made.uri.split('/').pop()
  await expect('the app edits it', 1, async () => {
    await xrpc('com.atproto.repo.putRecord', { repo: did, collection: 'app.bulleted.node', rkey: key, record: node('from the app, edited', watched, 'zz') }, sess.accessJwt)
    await look()
  })
  await expect('the app creates elsewhere', 0, async () => {
    await xrpc('com.atproto.repo.createRecord', { repo: did, collection: 'app.bulleted.node', record: node('elsewhere, from the app', elsewhere, 'zz') }, sess.accessJwt)
    await look()
  })
  await expect('the app deletes it', 1, async () => {
    await xrpc('com.atproto.repo.deleteRecord', { repo: did, collection: 'app.bulleted.node', rkey: key }, sess.accessJwt)
    await look()
  })
  const n = Number(process.env.SUBSCRIBE_EDITS || 0)
  if (!follow || n === 0) return
  const ms = []
  for (let i = 0; i < n; i++) {
    const before = updates.length
    await xrpc('com.atproto.repo.createRecord', { repo: did, collection: 'app.bulleted.node', record: node(`edit ${i}`, watched, `zz${String(i).padStart(4, '0')}`) }, sess.accessJwt)
    const t0 = performance.now()
    while (updates.length === before) {
      if (performance.now() - t0 > 10_000) fail(`edit ${i}: no update within 10 s`)
      await sleep(1)
    }
    ms.push(performance.now() - t0)
  }
  ms.sort((x, y) => x - y)
  const q = (p) => ms[Math.min(ms.length - 1, Math.floor(p * ms.length))].toFixed(1)
  latency = { edits: n, medianMs: q(0.5), p99Ms: q(0.99) }
}

// the subscriber's own writes
await expect('insert under the subtree', 1, () => call(a, 'insert_after', { parent: watched, text: 'second child' }))
await expect('edit in the subtree', 1, () => call(a, 'update_node', { node: child, text: 'first child, edited' }))
await expect('insert elsewhere', 0, () => call(a, 'insert_after', { parent: elsewhere, text: 'not watched' }))
await expect('read only', 0, () => call(a, 'read_outline', { node: watched }))
if (!pds) {
// another server process on the same directory (b) and a shell's call: a's
// server watches the directory, so the update comes without any call of a
await expect('another server\'s write under the subtree', 1, () => call(b, 'insert_after', { parent: watched, text: 'from the other server' }))
await expect('another server\'s write elsewhere', 0, () => call(b, 'update_node', { node: elsewhere, text: 'Elsewhere, renamed' }))
await expect('a read after those', 0, () => call(a, 'read_outline', { node: elsewhere }))
// a shell's `call` on the same directory
await expect('a shell call under the subtree', 1, async () => {
  const u = spawnSync(bin, ['call', '--store', store, 'update_node', JSON.stringify({ node: child, text: 'first child, from the shell' })], { encoding: 'utf8' })
  if (u.status !== 0) fail(`call update_node: ${u.stdout}${u.stderr}`)
})
}
if (pds) await direct(a)
await expect('delete in the subtree', 1, () => call(a, 'delete_node', { node: child }))
await a.unsubscribeResource({ uri })
await expect('after unsubscribe', 0, () => call(a, 'insert_after', { parent: watched, text: 'unheard' }))

await a.close()
await b?.close()
console.log('OK ' + JSON.stringify({ steps, latency }))
