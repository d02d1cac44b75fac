// The bulk tasks of issue #40 with the official MCP TypeScript SDK client,
// on a generated outline bulk_test.go seeded: every done todo of a level
// under a new Archive; #old renamed #new; a literal replace across a
// selection; a run of siblings moved by its first and last key; a
// 600-child level split into three headed sections; a delete by filter,
// dry run then plan; what changed since. The client names itself NAME
// (claude-code: auto gives it the structured mode; another name: both
// parts). For each task it counts the calls and the bytes the model is
// shown (SHOWN: text, the text content; structured, the structured
// content when there is some, else the text) and prints them with the keys
// the test reads the outline back by.
//
// Usage: node bulk.mjs SPEC.json NAME SHOWN BINARY [serve flags...]
import { readFileSync } from 'node:fs'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'

const [specFile, name, shown, bin, ...serveArgs] = process.argv.slice(2)
const spec = JSON.parse(readFileSync(specFile, 'utf8'))
const fail = (msg) => {
  console.error('FAIL ' + msg)
  process.exit(1)
}

const transport = new StdioClientTransport({ command: bin, args: ['serve', ...serveArgs], env: process.env, stderr: 'inherit' })
const client = new Client({ name, version: '1.0.0' })
await client.connect(transport)

const textOf = (res) => res.content.filter((c) => c.type === 'text').map((c) => c.text).join('')
const shownOf = (res) => {
  const t = Buffer.byteLength(textOf(res))
  if (shown === 'text' || res.structuredContent === undefined) return t
  return Buffer.byteLength(JSON.stringify(res.structuredContent))
}
const tasks = []
let task
const begin = (n) => {
  task = { name: n, calls: 0, shown: 0 }
  tasks.push(task)
}
// one counted call: what the model is shown of it
const call = async (tool, args) => {
  const res = await client.callTool({ name: tool, arguments: args })
  task.calls++
  task.shown += shownOf(res)
  if (res.isError) fail(`${task.name}: ${tool}: ${textOf(res)}`)
  return res
}
// what the model reads from a result: the structured content's field when
// it is shown structured content, else the text matched by re
const read = (res, field, re) => {
  if (shown === 'structured' && res.structuredContent) return field(res.structuredContent)
  const m = textOf(res).match(re)
  return m ? m[1] : ''
}
const keys = {}

begin('archive done todos')
let res = await call('insert_after', { parent: spec.level, position: 'first', text: 'Archive' })
keys.archive = read(res, (sc) => sc.created[0].rkey, /·([2-7a-z]{13}) "Archive"/)
await call('move_node', { where: { state: 'done', under: spec.level }, parent: keys.archive })

begin('rename #old to #new')
// the selection holds the #older bullets too: the rename must leave them
await call('update_node', { where: { text: '#old' }, find: '#old', replace: '#new' })

begin('replace a literal')
await call('update_node', { where: { under: spec.big, text: 'FY2026' }, find: 'FY2026', replace: 'FY2027' })

begin('move a run by first and last key')
await call('move_node', { from: spec.from, to: spec.to, after: spec.after })

// uncounted: the 600-child level the split task needs
const rows = Array.from({ length: 600 }, (_, i) => `  - row ${i}`).join('\n')
const imp = await client.callTool({ name: 'import_outline', arguments: { content: '- Six hundred\n' + rows + '\n' } })
if (imp.isError) fail(`import: ${textOf(imp)}`)
keys.six = imp.structuredContent ? (imp.structuredContent.created?.[0]?.rkey ?? imp.structuredContent.keys?.[0]) : (textOf(imp).match(/([2-7a-z]{13})/) || [])[1]
if (!keys.six) fail(`import: no key for the level: ${textOf(imp).slice(0, 300)}`)

begin('split 600 into three')
res = await call('move_node', { node: keys.six, split: ['First', 'Second', 'Third'] })
// since: a structured client has the rev of the split's commit; the text
// does not say revs, so a text client says the time before the delete
const since = shown === 'structured' ? res.structuredContent.rev : new Date().toISOString()

begin('delete by filter, dry run then plan')
res = await call('delete_node', { where: { text: 'FY2027' }, dry_run: true })
const plan = read(res, (sc) => sc.plan, /plan=(p[2-7a-z]+)/)
if (!plan) fail(`the dry run gave no plan: ${textOf(res).slice(0, 300)}`)
await call('delete_node', { where: { text: 'FY2027' }, plan })

begin('what changed since')
const deleted = new Set()
let args = { since, limit: 200 }
for (;;) {
  res = await call('search', args)
  for (const k of JSON.stringify(res.structuredContent ?? '').concat(textOf(res)).match(/\b[2-7a-z]{13}\b/g) ?? []) {
    if (spec.deleted.includes(k)) deleted.add(k)
  }
  const cur = res.structuredContent?.cursor ?? res.structuredContent?.nextCursor ?? (textOf(res).match(/cursor="([^"]+)"/) || [])[1]
  if (!cur || task.calls >= 10) break
  args = { since, limit: 200, cursor: cur }
}
keys.sinceShown = deleted.size

await client.close()
console.log('OK ' + JSON.stringify({ name, shown, tasks, keys }))
