// Browser test of /view: `bulleted-mcp serve --http` with a token, headless
// Debian Chromium (playwright-core) opening /view?token=… once (then the
// cookie), an agent writing through /mcp with the official MCP TypeScript
// SDK client, and the page following it live; Undo on the page. Every
// request off loopback is aborted and counted.
//
// Usage: node view.mjs BINARY STORE OUTDIR
// Prints `OK {...}` and writes OUTDIR/view-result.json and OUTDIR/*.png.
import { spawn } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { chromium } from 'playwright-core'

const [bin, store, out] = process.argv.slice(2)
const token = 'view-e2e-' + Math.random().toString(36).slice(2)
let srv, ctx
const fail = (msg) => {
  console.error('FAIL ' + msg)
  srv?.kill()
  process.exit(1)
}
const check = (cond, msg) => cond || fail(msg)
fs.mkdirSync(out, { recursive: true })

srv = spawn(bin, ['serve', '--http', '127.0.0.1:0', '--store', store], { env: { ...process.env, BULLETED_MCP_TOKEN: token }, stdio: ['ignore', 'inherit', 'pipe'] })
const origin = await new Promise((resolve) => {
  let buf = ''
  srv.stderr.on('data', (d) => {
    process.stderr.write(d)
    buf += d
    const m = /on http:\/\/([\d.:]+)\/mcp/.exec(buf)
    if (m) resolve('http://' + m[1])
  })
  srv.on('exit', (c) => fail('the server exited: ' + c))
})

// without the token: refused
for (const p of ['/view', '/view/events', '/view?token=wrong']) {
  const r = await fetch(origin + p, { redirect: 'manual' })
  check(r.status === 401, `${p} without the token: ${r.status}`)
}

const client = new Client({ name: 'bulleted-e2e-view', version: '1.0.0' })
await client.connect(new StreamableHTTPClientTransport(new URL(origin + '/mcp'), { requestInit: { headers: { Authorization: 'Bearer ' + token } } }))
const call = async (name, args) => {
  const res = await client.callTool({ name, arguments: args })
  if (res.isError) fail(`${name}: ${res.content?.[0]?.text}`)
  return res
}
await call('insert_after', { nodes: [
  { text: 'This week', layout: 'h1', children: [{ text: 'Water the plants', layout: 'todo', completed: true }, { text: 'Call Ana', layout: 'todo' }, { text: 'Draft the talk', note: 'twenty minutes, no slides' }] },
  { text: 'Ideas', children: [{ text: 'A garden map' }, { text: 'Bread on Sundays' }] },
] })

const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'bulleted-chromium-'))
ctx = await chromium.launchPersistentContext(profile, {
  executablePath: '/usr/bin/chromium',
  headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  viewport: { width: 900, height: 700 },
})
const external = []
await ctx.route('**/*', (route) => {
  const u = new URL(route.request().url())
  if (u.origin === origin) return route.continue()
  external.push(u.href)
  return route.abort()
})
const page = ctx.pages()[0] ?? (await ctx.newPage())
const logs = []
page.on('console', (m) => logs.push(m.type() + ': ' + m.text()))
page.on('pageerror', (e) => logs.push('pageerror: ' + e.message))
const resp = await page.goto(origin + '/view?token=' + encodeURIComponent(token))
check(new URL(page.url()).search === '', 'the token stays in the address: ' + page.url())
const csp = resp.headers()['content-security-policy'] || ''
check(resp.status() === 200 && csp.includes("default-src 'none'") && csp.includes("script-src 'sha256-"), `/view: ${resp.status()} CSP ${csp}`)
const cookies = await ctx.cookies()
check(cookies.some((c) => c.name === 'bulleted_view' && c.httpOnly && c.sameSite === 'Strict'), 'cookie ' + JSON.stringify(cookies))
check(await page.evaluate(() => document.cookie) === '', 'the page script can read the cookie')

const want = []
const flat = (rows) => { for (const r of rows) { want.push(r.rkey + ':' + (r.state ?? '')); flat(r.children ?? []) } }
flat((await call('read_outline', { format: 'json', depth: 20 })).structuredContent.nodes)
const shown = () => page.locator('li[data-rkey]').evaluateAll((els) => els.map((e) => e.dataset.rkey + ':' + e.dataset.state))
await page.locator('li[data-rkey]').first().waitFor({ timeout: 15000 }).catch(() => fail('/view shows no bullets\n' + logs.join('\n')))
check(JSON.stringify(await shown()) === JSON.stringify(want), `/view shows ${await shown()}, the outline read back is ${want}`)
await page.screenshot({ path: path.join(out, 'view-900.png'), fullPage: true })

// an agent writes: the page follows, without a reload
const ins = await call('insert_after', { text: 'Buy soil', layout: 'todo' })
const op = ins.structuredContent.operation
const key = ins.structuredContent.created[0].rkey
await page.locator(`li[data-rkey="${key}"]`).waitFor({ timeout: 15000 }).catch(() => fail('/view did not follow the write\n' + logs.join('\n')))
await page.locator(`tr[data-op="${op}"] button`).waitFor({ timeout: 15000 })
await page.setViewportSize({ width: 420, height: 800 })
await page.screenshot({ path: path.join(out, 'view-420.png'), fullPage: true })

// Undo on the page
await page.locator(`tr[data-op="${op}"] button`).click()
await page.locator('#undo-result').waitFor({ timeout: 15000 })
const undoText = await page.locator('#undo-result').textContent()
check(undoText.startsWith('Undone'), 'Undo: ' + undoText)
await page.locator(`li[data-rkey="${key}"]`).waitFor({ state: 'detached', timeout: 15000 }).catch(() => fail('the undone bullet stays on the page'))
check(external.length === 0, 'requests off loopback: ' + external.join(', '))
await ctx.close()
await client.close()
srv.removeAllListeners('exit')
srv.kill('SIGTERM')
await new Promise((r) => srv.on('exit', r))
fs.writeFileSync(path.join(out, 'view-result.json'), JSON.stringify({ undone: key, kept: want.map((w) => w.split(':')[0]) }))
console.log('OK ' + JSON.stringify({ shown: want.length, undone: key, external: 0, out }))
process.exit(0)
