// The import map a browser page needs to load ES modules from node_modules
// without a bundler: every bare specifier reachable from the entry points,
// resolved as Node resolves them under the "browser" condition (run node
// with --conditions=browser), mapped to /nm/<path under node_modules>.
import fs from 'node:fs'
import path from 'node:path'
import { pathToFileURL, fileURLToPath } from 'node:url'

export function importMap(entries, nodeModules) {
  const imports = {}
  const seen = new Set()
  const queue = []
  const re = /(?:\bfrom\s*|\bimport\s*\(?\s*)["']([^"'\s]+)["']/g
  const url = (file) => '/nm/' + path.relative(nodeModules, file).split(path.sep).join('/')
  for (const e of entries) {
    const f = fileURLToPath(import.meta.resolve(e))
    imports[e] = url(f)
    queue.push(f)
  }
  while (queue.length) {
    const f = queue.pop()
    if (seen.has(f)) continue
    seen.add(f)
    const src = fs.readFileSync(f, 'utf8')
    for (const m of src.matchAll(re)) {
      const s = m[1]
      if (s.startsWith('.') || s.startsWith('/')) {
        queue.push(path.resolve(path.dirname(f), s))
        continue
      }
      let r
      try {
        r = fileURLToPath(import.meta.resolve(s, pathToFileURL(f)))
      } catch {
        continue // named in a comment or a guarded import (the server SDK)
      }
      imports[s] ??= url(r)
      queue.push(r)
    }
  }
  return { imports }
}
