// panva's oidc-provider (the pinned version in package-lock.json) on 127.0.0.1, for the tests of
// PAR, DPoP and JWT client authentication. Test-only: never expose it beyond loopback.
//
// Run by tests/oidc_provider_server.py (which installs the package into a cache directory and runs
// a copy of this file from there). Settings come from the environment:
//   OIDC_PROVIDER_PORT        port on 127.0.0.1 (0 or unset: a free one)
//   OIDC_PROVIDER_CLIENTS     JSON array of client metadata (oidc-provider's names)
//   OIDC_PROVIDER_PAR         "required" (default) | "optional"
//   OIDC_PROVIDER_DPOP_NONCE  "required" (default) | "optional" (nonces still issued and checked)
//   OIDC_PROVIDER_ACCOUNT     JSON claims of the one test account (default: alice)
//   OIDC_PROVIDER_ACCESS_TOKEN_TTL, OIDC_PROVIDER_REFRESH_TOKEN_TTL   seconds
//   OIDC_PROVIDER_CLOCK_TOLERANCE   seconds (default 5)
// When it listens it prints one JSON line on stdout: {"port": ..., "issuer": ...}.
//
// Test-only routes (besides oidc-provider's own):
//   GET  /__log              every request received so far, as a JSON array (see record())
//   POST /__log/clear        empties the log
//   POST /__dpop/rotate      a new DPoP nonce secret: every nonce handed out so far stops working
//   GET  /interaction/:uid   the automatic sign-in and consent (no page): the fixed account signs
//                            in and grants everything asked; login_hint=deny answers access_denied
// RP-Initiated Logout's confirmation page is a bare form whose hidden fields already say "yes"
// (a browser without scripts posts it as it is), and Back-Channel Logout is on: a client with a
// backchannel_logout_uri gets a logout token there when the session ends.

import * as crypto from 'node:crypto';
import * as http from 'node:http';

import Provider, { errors } from 'oidc-provider';
// Not part of the public API (the version is pinned): the provider's internals, to swap the DPoP
// nonce secret at runtime.
import ServerChallenge from 'oidc-provider/lib/helpers/challenge.js';
import instance from 'oidc-provider/lib/helpers/weak_cache.js';

const env = process.env;
const parRequired = (env.OIDC_PROVIDER_PAR ?? 'required') === 'required';
const dpopNonceRequired = (env.OIDC_PROVIDER_DPOP_NONCE ?? 'required') === 'required';
const clockTolerance = Number(env.OIDC_PROVIDER_CLOCK_TOLERANCE ?? 5);
const accessTokenTTL = Number(env.OIDC_PROVIDER_ACCESS_TOKEN_TTL ?? 600);
const refreshTokenTTL = Number(env.OIDC_PROVIDER_REFRESH_TOKEN_TTL ?? 86400);
const account = JSON.parse(
  env.OIDC_PROVIDER_ACCOUNT
    ?? '{"sub": "alice", "name": "Alice Example", "email": "alice@example.test", "email_verified": true}',
);

const clients = JSON.parse(env.OIDC_PROVIDER_CLIENTS ?? '[]').map((client) => ({
  grant_types: ['authorization_code', 'refresh_token'],
  response_types: ['code'],
  ...client,
}));

function signingKeys() {
  const rsa = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey;
  const ec = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey;
  return [
    { ...rsa.export({ format: 'jwk' }), kid: 'rsa-1', alg: 'RS256', use: 'sig' },
    { ...ec.export({ format: 'jwk' }), kid: 'ec-1', alg: 'ES256', use: 'sig' },
  ];
}

// The claims of a JWT, unverified: only for the log.
function jwtClaims(value) {
  if (typeof value !== 'string') return undefined;
  try {
    return JSON.parse(Buffer.from(value.split('.')[1], 'base64url').toString('utf8'));
  } catch {
    return { unreadable: true };
  }
}

const log = [];

function record(ctx, startedAt) {
  const body = ctx.oidc?.body ?? {};
  const assertion = jwtClaims(body.client_assertion);
  const dpop = ctx.get('DPoP');
  const proof = dpop ? jwtClaims(dpop) : undefined;
  const authorization = ctx.get('Authorization');
  const answer = ctx.body && typeof ctx.body === 'object' && !Buffer.isBuffer(ctx.body) ? ctx.body : {};
  log.push({
    method: ctx.method,
    path: ctx.path,
    route: ctx.oidc?.route ?? null,
    status: ctx.respond === false ? ctx.res.statusCode : ctx.status,
    error: typeof answer.error === 'string' ? answer.error : null,
    error_description: typeof answer.error_description === 'string' ? answer.error_description : null,
    client_id: ctx.oidc?.client?.clientId ?? body.client_id ?? ctx.query.client_id ?? null,
    grant_type: body.grant_type ?? null,
    authorization_scheme: authorization ? authorization.split(' ')[0] : null,
    client_assertion: assertion !== undefined,
    client_assertion_jti: assertion?.jti ?? null,
    client_assertion_aud: assertion?.aud ?? null,
    dpop: Boolean(dpop),
    dpop_jti: proof?.jti ?? null,
    dpop_htm: proof?.htm ?? null,
    dpop_htu: proof?.htu ?? null,
    dpop_nonce: proof?.nonce ?? null,
    dpop_ath: proof?.ath ?? null,
    dpop_nonce_sent: ctx.response.get('DPoP-Nonce') || null,
    www_authenticate: ctx.response.get('WWW-Authenticate') || null,
    location: (ctx.respond === false ? ctx.res.getHeader('Location') : ctx.response.get('Location')) || null,
    ms: Date.now() - startedAt,
  });
}

async function automaticInteraction(provider, ctx) {
  const details = await provider.interactionDetails(ctx.req, ctx.res);
  const { prompt, params, session } = details;
  let result;
  if (params.login_hint === 'deny') {
    result = { error: 'access_denied', error_description: 'the test account said no' };
  } else if (prompt.name === 'login') {
    result = { login: { accountId: account.sub } };
  } else {
    const grant = details.grantId
      ? await provider.Grant.find(details.grantId)
      : new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
    const missing = prompt.details;
    if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(' '));
    if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims);
    for (const [indicator, scopes] of Object.entries(missing.missingResourceScopes ?? {})) {
      grant.addResourceScope(indicator, scopes.join(' '));
    }
    result = { consent: { grantId: await grant.save() } };
  }
  await provider.interactionFinished(ctx.req, ctx.res, result, { mergeWithLastSubmission: true });
  ctx.respond = false;
}

const server = http.createServer();
await new Promise((resolve, reject) => {
  server.once('error', reject);
  server.listen(Number(env.OIDC_PROVIDER_PORT ?? 0), '127.0.0.1', resolve);
});
const { port } = server.address();
const issuer = `http://127.0.0.1:${port}`;

const provider = new Provider(issuer, {
  clients,
  jwks: { keys: signingKeys() },
  cookies: { keys: [crypto.randomBytes(32).toString('base64url')] },
  claims: {
    openid: ['sub'],
    profile: ['name'],
    email: ['email', 'email_verified'],
  },
  scopes: ['openid', 'offline_access', 'profile', 'email', 'api'],
  clockTolerance,
  responseTypes: ['code'],
  pkce: { required: () => true },
  features: {
    devInteractions: { enabled: false },
    pushedAuthorizationRequests: {
      enabled: true,
      requirePushedAuthorizationRequests: parRequired,
    },
    dPoP: {
      enabled: true,
      nonceSecret: crypto.randomBytes(32),
      requireNonce: () => dpopNonceRequired,
    },
    userinfo: { enabled: true },
    revocation: { enabled: true },
    rpInitiatedLogout: {
      enabled: true,
      logoutSource: (ctx, form) => {
        ctx.type = 'html';
        ctx.body = `<!doctype html><html><body>${
          form.replace(
            '</form>',
            '<input type="hidden" name="logout" value="yes"/><button type="submit">Sign out</button></form>',
          )
        }</body></html>`;
      },
    },
    backchannelLogout: { enabled: true },
    introspection: { enabled: true },
    // `resource=<issuer>/api` (any path under it) gives a JWT access token for that audience;
    // without `resource` the access token is opaque and good for the userinfo endpoint.
    resourceIndicators: {
      enabled: true,
      defaultResource: (_ctx, _client, oneOf) => oneOf,
      useGrantedResource: () => false,
      getResourceServerInfo: (_ctx, resource) => {
        if (resource === `${issuer}/api` || resource.startsWith(`${issuer}/api/`)) {
          return { scope: 'api', audience: resource, accessTokenFormat: 'jwt' };
        }
        throw new errors.InvalidTarget();
      },
    },
  },
  interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
  // The app the tests serve is on loopback, which oidc-provider's SSRF guard refuses to reach
  // (its back-channel logout POST); this test-only server drops the guard's dispatcher.
  fetch: (url, options) => {
    const { dispatcher: _guard, ...rest } = options;
    return globalThis.fetch(url, rest);
  },
  findAccount: (_ctx, sub) => (sub === account.sub
    ? { accountId: sub, claims: () => ({ ...account }) }
    : undefined),
  issueRefreshToken: (_ctx, client) => client.grantTypeAllowed('refresh_token'),
  rotateRefreshToken: () => true,
  ttl: {
    AccessToken: accessTokenTTL,
    AuthorizationCode: 60,
    ClientCredentials: accessTokenTTL,
    IdToken: 3600,
    Interaction: 600,
    Grant: refreshTokenTTL,
    RefreshToken: refreshTokenTTL,
    Session: 3600,
  },
  renderError: (ctx, out) => {
    ctx.type = 'json';
    ctx.body = out;
  },
});

provider.use(async (ctx, next) => {
  const startedAt = Date.now();
  if (ctx.path === '/__log' && ctx.method === 'GET') {
    ctx.body = log;
    return;
  }
  if (ctx.path === '/__log/clear' && ctx.method === 'POST') {
    log.length = 0;
    ctx.status = 204;
    return;
  }
  if (ctx.path === '/__dpop/rotate' && ctx.method === 'POST') {
    instance(provider).DPoPNonces = new ServerChallenge(crypto.randomBytes(32), 'DPoP');
    ctx.status = 204;
    return;
  }
  try {
    const interaction = ctx.path.match(/^\/interaction\/[^/]+$/);
    if (interaction && ctx.method === 'GET') {
      try {
        await automaticInteraction(provider, ctx);
      } catch (error) {
        ctx.status = 400;
        ctx.body = { error: 'interaction_failed', error_description: String(error?.message ?? error) };
      }
    } else {
      await next();
    }
  } finally {
    record(ctx, startedAt);
  }
});

// oidc-provider logs its own errors through events; the tests read the log instead.
provider.on('server_error', (_ctx, error) => {
  process.stderr.write(`server_error: ${error?.stack ?? error}\n`);
});

provider.on('backchannel.error', (_ctx, error, clientId) => {
  process.stderr.write(`backchannel.error ${clientId?.clientId ?? clientId}: ${error?.cause ?? error}\n`);
});

server.on('request', provider.callback());

for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, () => {
    server.close();
    server.closeAllConnections();
    process.exit(0);
  });
}

process.stdout.write(`${JSON.stringify({ port, issuer })}\n`);
