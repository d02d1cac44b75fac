// Starts the reference PDS (@atproto/pds) with an in-memory PLC directory,
// both listening on 127.0.0.1 only, for the project's integration tests.
//
// Environment: PDS_PORT, PLC_PORT (required, free ports), PDS_DATA (a fresh
// directory), PDS_RATE_LIMITS_ENABLED=true to turn the PDS's rate limits on,
// LEXICON_AUTHORITY_DIR=a directory of lexicon JSON files: an account
// lexicons.test publishes each as a com.atproto.lexicon.schema record (rkey =
// its id) and becomes the PDS's lexicon authority, so that OAuth
// `include:` scopes resolve offline (unset: no such account, as before).
// With `node --require ./hosts.cjs` and PDS_LOOPBACK_HOSTS=name,... those
// names resolve to 127.0.0.1 in this process, and NODE_EXTRA_CA_CERTS adds a
// test's CA: the PDS can then fetch an https client ID (a confidential
// client's metadata and JWKS) from a test server on loopback (devMode turns
// the PDS's SSRF protection off, so private addresses are reachable).
// Prints one line `READY {"pds": URL, "plc": URL}` when both serve; stops on
// SIGTERM or SIGINT, or when standard input closes (so a test that dies
// leaves no server behind).
import crypto from 'node:crypto'
import fs from 'node:fs'
import path from 'node:path'
import { PDS, envToCfg, envToSecrets } from '@atproto/pds'
import { PlcServer, Database } from '@did-plc/server'

const pdsPort = Number(process.env.PDS_PORT)
const plcPort = Number(process.env.PLC_PORT)
const data = process.env.PDS_DATA
if (!pdsPort || !plcPort || !data) {
  console.error('pds.mjs: set PDS_PORT, PLC_PORT and PDS_DATA')
  process.exit(2)
}

// Listen on loopback only: both servers call app.listen(port).
const loopback = (app) => {
  const listen = app.listen.bind(app)
  app.listen = (port, ...rest) => listen(port, '127.0.0.1', ...rest)
}

const plc = PlcServer.create({ db: Database.mock(), port: plcPort })
loopback(plc.app)
await plc.start()

const env = {
  port: pdsPort,
  hostname: 'localhost',
  // a host name, not an IP literal: DID resolution refuses IP literals
  didPlcUrl: `http://localhost:${plcPort}`,
  dataDirectory: data,
  blobstoreDiskLocation: `${data}/blobs`,
  devMode: true,
  inviteRequired: false,
  serviceHandleDomains: ['.test'],
  jwtSecret: crypto.randomBytes(16).toString('hex'),
  adminPassword: 'admin-pass',
  plcRotationKeyK256PrivateKeyHex: crypto.randomBytes(32).toString('hex'),
  rateLimitsEnabled: process.env.PDS_RATE_LIMITS_ENABLED === 'true',
  crawlers: [],
}
const pds = await PDS.create(envToCfg(env), envToSecrets(env))
loopback(pds.app)
await pds.start()

const ready = { pds: `http://localhost:${pdsPort}`, plc: `http://localhost:${plcPort}` }
if (process.env.LEXICON_AUTHORITY_DIR) {
  ready.lexiconAuthority = await publishLexicons(ready.pds, process.env.LEXICON_AUTHORITY_DIR)
  // read by the lexicon resolver's onResolveAuthority hook on every resolution
  pds.ctx.cfg.lexicon.didAuthority = ready.lexiconAuthority
}
console.log('READY ' + JSON.stringify(ready))

async function publishLexicons(url, dir) {
  const xrpc = async (nsid, body, token) => {
    const res = await fetch(`${url}/xrpc/${nsid}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
      body: JSON.stringify(body),
    })
    if (!res.ok) throw new Error(`${nsid}: ${res.status} ${await res.text()}`)
    return res.json()
  }
  const account = await xrpc('com.atproto.server.createAccount', {
    email: 'lexicons@example.com', handle: 'lexicons.test', password: crypto.randomBytes(16).toString('hex'),
  })
  for (const name of fs.readdirSync(dir).filter((n) => n.endsWith('.json')).sort()) {
    const doc = JSON.parse(fs.readFileSync(path.join(dir, name), 'utf8'))
    await xrpc('com.atproto.repo.putRecord', {
      repo: account.did, collection: 'com.atproto.lexicon.schema', rkey: doc.id,
      record: { ...doc, $type: 'com.atproto.lexicon.schema' },
    }, account.accessJwt)
  }
  return account.did
}

let stopping = false
const stop = async () => {
  if (stopping) return
  stopping = true
  await pds.destroy().catch(() => {})
  await plc.destroy().catch(() => {})
  process.exit(0)
}
process.on('SIGTERM', stop)
process.on('SIGINT', stop)
process.stdin.on('end', stop)
process.stdin.resume()
