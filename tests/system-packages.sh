#!/bin/sh
# What the browser tests need from the system, beyond Python and Node.js: Chromium (for the HTML report and for
# VS Code in code-server), ripgrep (VS Code's search; its npm package would download it) and what code-server's
# native modules are compiled with. On Debian or Ubuntu the missing packages are installed (as root, or with
# sudo); elsewhere this says what is missing. MARGIN_SKIP_BROWSER_TESTS=1 skips those tests, and this check.
set -eu
if [ "${MARGIN_SKIP_BROWSER_TESTS:-}" = 1 ]; then
  exit 0
fi
packages="chromium ripgrep build-essential libkrb5-dev libxkbfile-dev libsecret-1-dev libx11-dev"
if command -v dpkg-query >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  missing=""
  for package in $packages; do
    if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "ok installed"; then
      missing="$missing $package"
    fi
  done
  if [ -z "$missing" ]; then
    exit 0
  fi
  if [ "$(id -u)" = 0 ]; then
    as_root=""
  elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    as_root="sudo -n"
  else
    echo "margin's browser tests need these Debian packages:$missing. Install them as root (apt-get install$missing), or set MARGIN_SKIP_BROWSER_TESTS=1." >&2
    exit 1
  fi
  echo "Installing the Debian packages the browser tests need:$missing" >&2
  $as_root apt-get update -qq
  # shellcheck disable=SC2086 # one word per package
  DEBIAN_FRONTEND=noninteractive $as_root apt-get install -y -qq $missing >/dev/null
  exit 0
fi
for command in rg c++ make; do
  if ! command -v "$command" >/dev/null 2>&1; then
    echo "margin's browser tests need $command (Debian: $packages). Install it, or set MARGIN_SKIP_BROWSER_TESTS=1." >&2
    exit 1
  fi
done
if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1 && ! command -v google-chrome >/dev/null 2>&1; then
  echo "margin's browser tests need Chromium on PATH. Install it, or set MARGIN_SKIP_BROWSER_TESTS=1." >&2
  exit 1
fi
