#!/usr/bin/env bash
# Makes sure the Debian Chromium the browser tests drive is installed
# (/usr/bin/chromium): installs it with apt-get when missing. Fails, loudly,
# when it cannot: the browser tests never skip.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
if [[ -x /usr/bin/chromium ]]; then
  exit 0
fi
sudo=""
if [[ $(id -u) -ne 0 ]]; then
  sudo="sudo -n"
fi
echo "browser.sh: /usr/bin/chromium missing; installing the Debian package" >&2
if ! $sudo apt-get install -y --no-install-recommends chromium >&2; then
  $sudo apt-get update >&2
  $sudo apt-get install -y --no-install-recommends chromium >&2
fi
if [[ ! -x /usr/bin/chromium ]]; then
  echo "browser.sh: FAIL: chromium could not be installed (apt-get install chromium)" >&2
  exit 1
fi
