# Sourced by scripts/lab, scripts/test and scripts/run-notebooks: environment every command wants.

# Mesa's Vulkan driver (lavapipe) prints "XDG_RUNTIME_DIR is invalid or not set" on every adapter
# probe when the variable is missing, as in root shells, containers and CI. Give it a private folder.
if [ -z "${XDG_RUNTIME_DIR:-}" ] || [ ! -d "$XDG_RUNTIME_DIR" ]; then
    export XDG_RUNTIME_DIR="${TMPDIR:-/tmp}/asgteach-runtime-$(id -u)"
    mkdir -p -m 700 "$XDG_RUNTIME_DIR"
fi
