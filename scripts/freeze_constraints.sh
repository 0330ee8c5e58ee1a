#!/usr/bin/env bash
# Rewrite constraints.txt from an environment whose tests just passed: the versions last seen green.
#
#   scripts/freeze_constraints.sh [PYTHON]      PYTHON: that environment's interpreter (default: python on PATH)
#
# `BFT_FREEZE=1 .ci/run` calls it with the fresh CI environment after a green run; commit the file it writes.
# pip freeze --exclude-editable leaves out the project itself (installed with -e); pip, setuptools and wheel are
# not listed by pip freeze, and a constraint would not reach pip's isolated build environment anyway.
set -euo pipefail
cd "$(dirname "$0")/.."
py="${1:-python}"
frozen="$("$py" -m pip freeze --exclude-editable)"
{
  echo "# The versions last seen green: pip freeze of an environment in which the test suite passed"
  echo "# ($("$py" --version 2>&1), $(date -u +%Y-%m-%d)). Install them with"
  echo "#   pip install -c constraints.txt -e \".[test]\""
  echo "# Regenerate after a green run: BFT_FREEZE=1 .ci/run (or scripts/freeze_constraints.sh PYTHON)."
  printf '%s\n' "$frozen"
} > constraints.txt.new
mv constraints.txt.new constraints.txt
echo "wrote constraints.txt ($(printf '%s\n' "$frozen" | grep -c .) packages)"
