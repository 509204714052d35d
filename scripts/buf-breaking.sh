#!/usr/bin/env bash
# Fails when proto/ breaks compatibility with the base branch (FILE rules of buf.yaml).
# Base: $BUF_BREAKING_BASE, else origin/main; skipped, saying so, when the clone has no base.
set -euo pipefail
cd "$(dirname "$0")/.."
base="${BUF_BREAKING_BASE:-origin/main}"
if ! git rev-parse --verify --quiet "$base^{commit}" >/dev/null; then
  echo "buf breaking: skipped — no base '$base' in this clone (set BUF_BREAKING_BASE to compare with another ref)"
  exit 0
fi
if ! git cat-file -e "$base:proto/runhook" 2>/dev/null; then
  echo "buf breaking: skipped — '$base' has no proto/runhook yet"
  exit 0
fi
echo "buf breaking: comparing proto/ with $base"
npx --no-install buf breaking --against ".git#ref=$(git rev-parse "$base"),subdir=." 
echo "buf breaking: no breaking changes"
