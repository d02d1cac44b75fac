// An end-to-end session with the official MCP TypeScript SDK client (a
// client this project did not write): it starts `bulleted-mcp serve` over
// stdio, lists the tools, inserts, moves, completes, reads the outline back
// and checks it, and asks for progress on a multi-commit insert.
//
// Usage: node client.mjs BINARY [serve flags...]
// Exits 0 and prints `OK {...figures}` when every check passed.
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'

const [bin, ...serveArgs] = process.argv.slice(2)
const fail = (msg) => {
  console.error('FAIL ' + msg)
  process.exit(1)
}
const check = (cond, msg) => cond || fail(msg)

const transport = new StdioClientTransport({
  command: bin,
  args: ['serve', ...serveArgs],
  env: process.env,
  stderr: 'inherit',
})
const client = new Client({ name: 'bulleted-e2e', version: '1.0.0' })
await client.connect(transport)
// the wire, as the SDK's transport hands it over: every progress
// notification must come before the result of its request (the server's
// part). The SDK (1.32.2) then runs a notification's handler on a microtask
// and a result's at once, so progress read in the same chunk as its result
// (a client descheduled meanwhile) never reaches onprogress
// (modelcontextprotocol/typescript-sdk#2580): the count is checked here.
const answered = new Set(), late = [], wire = []
const sdkOnMessage = transport.onmessage
transport.onmessage = (m, extra) => {
  if (m.method === 'notifications/progress') {
    wire.push(m.params)
    if (answered.has(String(m.params?.progressToken))) late.push(m.params)
  } else if (m.method === undefined && m.id !== undefined) answered.add(String(m.id))
  sdkOnMessage(m, extra)
}

const call = async (name, args, extra) => {
  const res = await client.callTool({ name, arguments: args }, undefined, extra)
  if (res.isError) fail(`${name} ${JSON.stringify(args)}: ${res.content?.[0]?.text}`)
  return res
}

// tools and their annotations
const { tools } = await client.listTools()
const names = tools.map((t) => t.name)
for (const want of ['read_outline', 'insert_after', 'move_node', 'complete_todo', 'set_comment_policy', 'undo', 'apply_batch']) {
  check(names.includes(want), `tool ${want} missing from ${names}`)
}
for (const t of tools) {
  const a = t.annotations ?? {}
  for (const k of ['readOnlyHint', 'destructiveHint', 'idempotentHint', 'openWorldHint']) {
    check(typeof a[k] === 'boolean', `${t.name} does not set ${k}`)
  }
}

// insert the worked example, nested, with a note and a ticked todo
const ins = await call('insert_after', {
  nodes: [{ text: 'Groceries', children: [
    { text: 'Eggs', layout: 'todo', note: 'Jumbo, if they have them' },
    { text: 'Bread', layout: 'todo', completed: true },
    { text: 'Milk', layout: 'todo' },
  ] }],
})
const created = ins.structuredContent.created
check(created.length === 4, `created ${JSON.stringify(created)}`)
const [groceries, eggs, bread, milk] = created.map((c) => c.rkey)

// a client mistake the server accepts: nodes sent as a JSON string
await call('insert_after', { parent: groceries, position: 'first', nodes: JSON.stringify([{ text: 'Coffee' }]) })

// move Milk before Eggs (after Coffee), tick Eggs
const coffeeOutline = await call('read_outline', { node: groceries, format: 'json' })
const coffee = coffeeOutline.structuredContent.nodes[0].rkey
await call('move_node', { node: milk, after: coffee })
await call('complete_todo', { node: eggs })

// read back and check order, state, note
const read = await call('read_outline', { format: 'json', depth: 3, notes: true })
const top = read.structuredContent.nodes
check(top.length === 1 && top[0].text === 'Groceries', `top ${JSON.stringify(top)}`)
const kids = top[0].children
check(JSON.stringify(kids.map((k) => k.text)) === JSON.stringify(['Coffee', 'Milk', 'Eggs', 'Bread']), `order ${kids.map((k) => k.text)}`)
const byText = Object.fromEntries(kids.map((k) => [k.text, k]))
check(byText.Eggs.state === 'done' && byText.Eggs.note === 'Jumbo, if they have them', `eggs ${JSON.stringify(byText.Eggs)}`)
check(byText.Bread.state === 'done' && byText.Milk.state === 'open', 'todo states')
// the full form: the app view's getOutline rows
const full = await call('read_outline', { node: groceries, format: 'json', fields: 'full' })
check(full.structuredContent.nodes.every((n) => n.uri && n.cid && n.sortKey && n.createdAt), `full rows ${JSON.stringify(full.structuredContent.nodes[0])}`)
check(!!full.structuredContent.nodes.find((n) => n.rkey === eggs).completedAt, 'full rows: completedAt')
check(byText.Eggs.rkey === eggs && byText.Bread.rkey === bread, 'record keys kept')

const text = await call('read_outline', {})
check(text.content[0].text.includes('[x] Eggs [note] ·' + eggs), `text view:\n${text.content[0].text}`)

// an error the model can act on: anchor not a child of the parent
const bad = await client.callTool({ name: 'move_node', arguments: { node: milk, parent: groceries, after: groceries } })
check(bad.isError && /read_outline/.test(bad.content[0].text), `bad anchor: ${JSON.stringify(bad)}`)

// dry run writes nothing
const dry = await call('delete_node', { node: groceries, children: 'subtree', dry_run: true })
check(dry.structuredContent.dryRun === true && dry.structuredContent.cost > 0, 'dry run')
const again = await call('read_outline', { format: 'json' })
check(again.structuredContent.nodes[0].children.length === 4, 'dry run wrote')

// a multi-commit insert reports progress
const progress = []
const many = Array.from({ length: 250 }, (_, i) => ({ text: `item ${i}` }))
const sent = wire.length
const big = await call('insert_after', { parent: groceries, nodes: many }, {
  onprogress: (p) => progress.push(p),
  timeout: 120000,
})
check(big.structuredContent.commits === 2, `commits ${big.structuredContent.commits}`)
const got = wire.slice(sent)
check(got.length === 2 && got[1].progress === 1 && got[1].total === 2, `progress on the wire ${JSON.stringify(got)}`)
check(late.length === 0, `progress after its result: ${JSON.stringify(late)}`)
check(progress.length >= 1 && progress[0].progress === 0, `onprogress ${JSON.stringify(progress)}`)
if (progress.length < 2) console.error(`note: the SDK dropped ${2 - progress.length} progress notification(s) read in the same chunk as the result (typescript-sdk#2580); they came before it`)

// undo the big insert
await call('undo', {})
const afterUndo = await call('read_outline', { node: groceries, format: 'json' })
check(afterUndo.structuredContent.nodes.length === 4, `after undo ${afterUndo.structuredContent.nodes.length}`)

// strict inputs: refused by name or path, nothing written; the documented
// coercions accepted
const refuse = async (name, args, want) => {
  const before = await call('read_outline', { format: 'json', depth: 5, limit: 5000 })
  const res = await client.callTool({ name, arguments: args })
  check(res.isError && res.content[0].text.includes(want), `${name} ${JSON.stringify(args)}: want refusal with ${want}, got ${JSON.stringify(res.content)}`)
  check(typeof res.structuredContent?.error?.kind === 'string', `no error kind: ${JSON.stringify(res.structuredContent)}`)
  const after = await call('read_outline', { format: 'json', depth: 5, limit: 5000 })
  const was = before.structuredContent.nodes, is = after.structuredContent.nodes
  const at = is.findIndex((n, i) => JSON.stringify(n) !== JSON.stringify(was[i]))
  check(at < 0 && is.length === was.length, `${name}: a refused call wrote (${was.length} rows before, ${is.length} after; first difference at ${at}: ${JSON.stringify(was[at])} then ${JSON.stringify(is[at])})`)
}
await refuse('insert_after', { text: 'x', parent_id: groceries }, 'unknown argument parent_id (did you mean parent?)')
await refuse('insert_after', { text: { a: 1 } }, 'text must be string')
await refuse('insert_after', { nodes: [{ title: 'y' }] }, 'nodes[0].text is required')
await refuse('apply_batch', { ops: [{ tool: 'insert_after', args: { text: 'z', dry_run: true } }] }, 'ops[0].args.dry_run')
await refuse('undo', { steps: 0 }, 'steps')
const strArr = await call('insert_after', { parent: groceries, nodes: JSON.stringify([{ text: 'Tea' }]), dry_run: 'true' })
check(strArr.structuredContent.dryRun === true, 'stringified array and "true" accepted')

// every tool declares an output schema (the SDK client validates
// structuredContent against it on every call above)
for (const t of tools) check(t.outputSchema?.type === 'object', `${t.name} has no output schema`)

// the rest writes ~30,000 points: more than a PDS's hourly budget allows
const onPDS = serveArgs.includes('--pds')
let bytes = 0
let inc = { batchesLanded: 0, batches: 0 }
if (!onPDS) {
// find and complete in a 2,000-bullet outline: search, then complete_todo
// (three levels: the deepest nesting goes in as markdown)
await refuse('insert_after', { nodes: [{ text: 'a', children: [{ text: 'b', children: [{ text: 'c' }] }] }] }, 'pass deeper outlines as markdown')
for (let s = 0; s < 20; s++) {
  let md = `- Section ${s}\n`
  for (let j = 0; j < 10; j++) {
    md += `  - Area ${s}.${j}\n`
    for (let k = 0; k < 9; k++) {
      md += s === 13 && j === 7 && k === 4 ? '    - [ ] Prepare the budget review for Q3\n' : `    - [ ] task ${s}.${j}.${k} #work\n`
    }
  }
  await call('insert_after', { markdown: md }, { timeout: 120000 })
}
const found = await call('search', { text: 'budget review' })
bytes += JSON.stringify(found.content).length + JSON.stringify(found.structuredContent).length
// the compact hits: the outline's subtree that holds them (an entry is a hit, or an ancestor [text, entries...])
const flatHits = (entries) => entries.flatMap((h) => (Array.isArray(h) ? flatHits(h.slice(1)) : [h]))
const hits = flatHits(found.structuredContent.hits)
const hit = hits[0]
check(hits.length === 1 && hit.text.includes('budget review'), `search: ${JSON.stringify(found.structuredContent)}`)
const done = await call('complete_todo', { node: hit.rkey })
bytes += JSON.stringify(done.content).length + JSON.stringify(done.structuredContent).length
check(bytes <= 2048, `find and complete took ${bytes} bytes`)

// cancellation stops a multi-commit insert between commits
const ctl = new AbortController()
const huge = Array.from({ length: 3000 }, (_, i) => ({ text: `c${i}`, note: `n${i}` }))
let cancelled = false
const pending = client.callTool({ name: 'insert_after', arguments: { nodes: huge } }, undefined, {
  signal: ctl.signal, timeout: 120000, onprogress: (p) => { if (p.progress >= 2 && !cancelled) { cancelled = true; ctl.abort() } },
}).catch((e) => e)
await pending
check(cancelled, 'the insert finished before it could be cancelled')
let ops = { structuredContent: { operations: [] } }
for (let i = 0; i < 50; i++) { // the server stops after the batch in flight
  ops = await call('operations', { incomplete: true })
  if (ops.structuredContent.operations.length > 0) break
  await new Promise((r) => setTimeout(r, 100))
}
inc = ops.structuredContent.operations[0]
check(inc && inc.batchesLanded >= 2 && inc.batchesLanded < inc.batches && /cancel/.test(inc.reason), `after cancel: ${JSON.stringify(ops.structuredContent)}`)
await call('undo', { operation: inc.id }, { timeout: 120000 })
const cleared = await call('operations', { incomplete: true })
check(cleared.structuredContent.operations.length === 0, 'undo of the cancelled operation')
}

await client.close()
console.log('OK ' + JSON.stringify({ tools: names.length, progress: progress.length, findAndCompleteBytes: bytes, cancelledAfterBatches: inc.batchesLanded, ofBatches: inc.batches }))
