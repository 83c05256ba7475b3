#!/usr/bin/env bash
# Headless Chromium for tests/browser: Debian's chromium and chromium-driver, installed with apt-get when
# they are missing and we can (root, apt-get present). Where we cannot, say so: the browser tests skip.
set -uo pipefail
if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then
  exit 0
fi
if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  if apt-get update -qq && apt-get install -y -qq chromium chromium-driver >/dev/null; then
    exit 0
  fi
fi
echo "chromium not installed (no apt-get, not root, or the install failed): the browser tests will skip" >&2
exit 0
