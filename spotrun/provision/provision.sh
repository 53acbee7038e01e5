#!/usr/bin/env bash
# Make a machine able to run spotrun jobs. Idempotent: run it any number of times.
#
# The one provision script: `spotrun launch --cloud aws` runs it over SSH on every new instance
# (after pushing spotrun's code), and ami/ runs it while baking an image, so that an instance
# started from that image finds everything in place and this script only checks.
#
#   provision.sh [--python PYTHON] [--root DIR] [--code DIR]
#
#   --python  the image's python (with PyTorch where the image has it); default python3
#   --root    spotrun's folder on the machine; default ~/.spotrun
#   --code    a folder holding the `spotrun` package to run (pushed by the launch)
#
# spotrun runs from its own venv in ROOT/venv, layered over the image's python: the venv sees
# the image's packages (PyTorch, CUDA builds) and, first, the pushed spotrun code. Whatever the
# image lacks is installed into that venv with pip; nothing of the image is changed.
set -euo pipefail

python=python3
root="$HOME/.spotrun"
code=""
while [ $# -gt 0 ]; do
  case "$1" in
    --python) python=$2; shift 2 ;;
    --root) root=$2; shift 2 ;;
    --code) code=$2; shift 2 ;;
    *) echo "provision.sh: unknown option $1" >&2; exit 2 ;;
  esac
done

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo -n "$@"; fi; }
apt_install() {
  echo "provision: installing $* (apt)"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

# 1. tmux: the job lives in a tmux session.
command -v tmux >/dev/null 2>&1 || apt_install tmux
# 2. python.
command -v "$python" >/dev/null 2>&1 || apt_install python3 python3-venv python3-pip

# 3. spotrun's venv over the image's python.
venv="$root/venv"
mkdir -p "$root"
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv --without-pip "$venv" 2>/dev/null || {
    apt_install python3-venv
    "$python" -m venv --without-pip "$venv"
  }
fi
# The venv sees, in this order: the pushed code, then the image's own packages.
pth=$("$python" - "$venv" "$code" <<'PY'
import os, site, sys
venv, code = sys.argv[1], sys.argv[2]
version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
pth = os.path.join(venv, "lib", version, "site-packages", "spotrun.pth")
lines = ([code] if code else []) + site.getsitepackages() + [site.getusersitepackages()]
with open(pth + ".tmp", "w") as fh:
    fh.write("\n".join(lines) + "\n")
os.replace(pth + ".tmp", pth)
print(pth)
PY
)

# 4. what the image lacks (a presence check: importing torch would take seconds).
missing=$("$venv/bin/python" - <<'PY'
import importlib.util
needed = {
    "torch": "torch>=2.1", "numpy": "numpy>=1.24", "libtmux": "libtmux>=0.37",
    "typer": "typer>=0.12", "rich": "rich>=13", "pydantic": "pydantic>=2.5",
    "sklearn": "scikit-learn>=1.3", "boto3": "boto3>=1.28",
}
if importlib.util.find_spec("spotrun") is None:
    raise SystemExit("provision: the spotrun code is not on the venv's path")
print(" ".join(spec for module, spec in needed.items() if importlib.util.find_spec(module) is None))
PY
)
if [ -n "$missing" ]; then
  "$python" -m pip --version >/dev/null 2>&1 || apt_install python3-pip
  echo "provision: installing $missing (pip)"
  # --target: into the venv only (pip's --python option is too new for Ubuntu 22.04's pip).
  # shellcheck disable=SC2086  # one word per requirement
  "$python" -m pip install -q --disable-pip-version-check --target "$(dirname "$pth")" $missing
fi

# 5. a data cache that recipes and images share.
mkdir -p "$root/data"

echo "provisioned: $venv/bin/python"
