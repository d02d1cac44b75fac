// Paging while the outline changes, with the official MCP TypeScript SDK
// client (issue #25): on a generated outline, page the big level with
// read_outline (text) and then with search (under it), and between pages
// move one bullet already read to the end of the level and one not read yet
// to its front. Every child must come exactly once, and every page after a
// move must say that the outline changed since the read began (text and
// structured content, with the number of records changed).
//
// Usage: node paging.mjs WANT.json BINARY [serve flags...]
// WANT.json: {big, children (in order), subtree}. Exits 0 and prints
// `OK {...figures}` when every check passed.
import { readFileSync } from 'node:fs'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'

const [wantFile, bin, ...serveArgs] = process.argv.slice(2)
const want = JSON.parse(readFileSync(wantFile, 'utf8'))
const fail = (msg) => {
  console.error('FAIL ' + msg)
  process.exit(1)
}
const check = (cond, msg) => cond || fail(typeof msg === 'function' ? msg() : msg)

const transport = new StdioClientTransport({ command: bin, args: ['serve', ...serveArgs], env: process.env, stderr: 'inherit' })
const client = new Client({ name: 'bulleted-e2e-paging', version: '1.0.0' })
await client.connect(transport)

const call = async (name, args) => {
  const res = await client.callTool({ name, arguments: args }, undefined, { timeout: 120000 })
  if (res.isError) fail(`${name} ${JSON.stringify(args)}: ${res.content?.[0]?.text}`)
  return res
}
const textOf = (res) => res.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n')
// text lines end with ·RKEY
const lineKeys = (res) => textOf(res).split('\n').map((l) => l.match(/·(\S+)$/)?.[1]).filter((k) => k && k !== want.big)
// search hits: the compact tree (an entry is a hit, or an ancestor [text, entries...])
const flatHits = (entries) => entries.flatMap((h) => (Array.isArray(h) ? flatHits(h.slice(1)) : [h]))
const hitKeys = (res) => flatHits(res.structuredContent.hits).map((h) => h.rkey).filter((k) => k !== want.big)

const isChild = new Set(want.children)

// page tool from the start; between pages move a child read on this page to
// the end of the level and a child not read yet to its front
async function pageWhileMoving(tool, args, keysOf, expected) {
  const seen = new Map()
  const moved = new Set()
  let cursor
  let pages = 0
  let moves = 0
  let bytes = 0
  let largest = 0
  for (;;) {
    const res = await call(tool, cursor ? { ...args, cursor } : args)
    pages++
    const size = JSON.stringify(res.content).length + JSON.stringify(res.structuredContent ?? {}).length
    bytes += size
    largest = Math.max(largest, size)
    const keys = keysOf(res)
    for (const k of keys) seen.set(k, (seen.get(k) ?? 0) + 1)
    const ch = res.structuredContent?.changedSince
    if (moves > 0) {
      check(ch && ch.snapshot === true && ch.changed === moves && ch.rev && ch.rev !== ch.now,
        () => `${tool} page ${pages}: changedSince ${JSON.stringify(ch)} after ${moves} moves`)
      const txt = textOf(res)
      check(/the outline has changed since this read began/.test(txt) && /read again from the start \(without cursor\)/.test(txt),
        () => `${tool} page ${pages}: no change notice in the text:\n${txt.slice(-600)}`)
    } else {
      check(ch === undefined, () => `${tool} page ${pages}: a change notice before any change: ${JSON.stringify(ch)}`)
    }
    cursor = res.structuredContent?.cursor
    if (!cursor) break
    const back = keys.find((k) => isChild.has(k) && !moved.has(k))
    const ahead = want.children.filter((k) => !seen.has(k) && !moved.has(k))[10]
    check(back && ahead, `${tool} page ${pages}: nothing to move`)
    await call('move_node', { node: back, parent: want.big, position: 'last' })
    await call('move_node', { node: ahead, parent: want.big, position: 'first' })
    moved.add(back).add(ahead)
    moves += 2
  }
  for (const k of expected) check(seen.get(k) === 1, () => `${tool}: ${k} seen ${seen.get(k) ?? 0} times`)
  check(seen.size === expected.length, () => `${tool}: ${seen.size} distinct rows, want ${expected.length}`)
  check(moves >= 10, `${tool}: only ${moves} moves`)
  return { pages, moves, bytes, largest, lastAhead: [...moved].at(-1) }
}

const read = await pageWhileMoving('read_outline', { node: want.big, depth: 1, limit: 200 }, lineKeys, want.children)

// the repository as read back: a read from the start has no notice, every
// child is still under the level, the last bullet moved to the front first
const fresh = await call('read_outline', { node: want.big, depth: 1, limit: 5 })
check(fresh.structuredContent.changedSince === undefined, 'a read from the start has a change notice')
check(lineKeys(fresh)[0] === read.lastAhead, () => `after the moves the level starts ${lineKeys(fresh)[0]}, want ${read.lastAhead}`)

const found = await pageWhileMoving('search', { text: '.', regex: true, under: want.big, limit: 100 }, hitKeys, want.subtree)

await client.close()
console.log('OK ' + JSON.stringify({ children: want.children.length, read, search: found }))
