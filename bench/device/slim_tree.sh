#!/bin/bash
# on: keep bench/results, rules, tests and examples (58 of the tree's 60 MB) from travelling to the device
# (untracked in the index and git-ignored; the files stay on disk). off: undo both. Commit nothing between.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
exclude="$(git rev-parse --git-dir)/info/exclude"
paths=(bench/results rules tests examples)
case "${1:-}" in
  on) git rm -r -q --cached "${paths[@]}"
      for p in "${paths[@]}"; do echo "/$p/" >> "$exclude"; done
      git ls-files -z | xargs -0 du -cb | tail -1; du -cb .dev | tail -1 ;;
  off) git reset -q
       for p in "${paths[@]}"; do sed -i "\|^/$p/\$|d" "$exclude"; done
       git status --short | head ;;
  *) echo "usage: $0 on|off" >&2; exit 2 ;;
esac
