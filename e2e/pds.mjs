// Starts the reference PDS (@atproto/pds) with an in-memory PLC directory,
// both listening on 127.0.0.1 only, for the project's integration tests.
//
// Environment: PDS_PORT, PLC_PORT (required, free ports), PDS_DATA (a fresh
// directory), PDS_RATE_LIMITS_ENABLED=true to turn the PDS's rate limits on.
// Prints one line `READY {"pds": URL, "plc": URL}` when both serve; stops on
// SIGTERM or SIGINT, or when standard input closes (so a test that dies
// leaves no server behind).
import crypto from 'node:crypto'
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
console.log('READY ' + JSON.stringify({ pds: `http://localhost:${pdsPort}`, plc: `http://localhost:${plcPort}` }))

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
