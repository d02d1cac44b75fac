// Preloaded into the reference PDS's process (node --require ./hosts.cjs)
// by pdstest when a test serves something the PDS must reach under a
// domain name (an https client ID: the PDS refuses IP literals and
// loopback names there). PDS_LOOPBACK_HOSTS is a comma-separated list of
// host names; each resolves to 127.0.0.1 in this process, for every
// resolution that goes through dns.lookup (net.connect and tls.connect
// call it when given no lookup of their own, as undici's Agent does) or
// dns.promises.lookup. Every other name resolves as usual. The test's CA
// comes in through NODE_EXTRA_CA_CERTS.
'use strict'
const dns = require('node:dns')

const names = new Set(
  (process.env.PDS_LOOPBACK_HOSTS || '')
    .split(',')
    .map((s) => s.trim().toLowerCase().replace(/\.$/, ''))
    .filter(Boolean),
)

if (names.size > 0) {
  const mapped = (host) => typeof host === 'string' && names.has(host.toLowerCase().replace(/\.$/, ''))
  const answer = (options) => {
    const all = typeof options === 'object' && options !== null && options.all
    return all ? [{ address: '127.0.0.1', family: 4 }] : { address: '127.0.0.1', family: 4 }
  }

  const lookup = dns.lookup
  dns.lookup = function (hostname, options, callback) {
    if (!mapped(hostname)) return lookup.apply(this, arguments)
    if (typeof options === 'function') {
      callback = options
      options = {}
    }
    const a = answer(options)
    process.nextTick(() => (Array.isArray(a) ? callback(null, a) : callback(null, a.address, a.family)))
    return {}
  }

  const plookup = dns.promises.lookup
  dns.promises.lookup = function (hostname, options) {
    if (!mapped(hostname)) return plookup.apply(this, arguments)
    return Promise.resolve(answer(options))
  }
}
