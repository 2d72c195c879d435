# contrib/usage.sh - sourced by contrib scripts for their -h/--help: the
# usage is the script's header comment (line 2 down to its `set -eu`).
# usage_of SCRIPT: prints it.
usage_of() { sed -n '2,/^set -eu/p' "$1" | sed '$d; s/^# \{0,1\}//'; }
# help_asked SCRIPT ARG: -h or --help: the usage, exit 0.
help_asked() {
    case $2 in -h | --help)
        usage_of "$1"
        exit 0
        ;;
    esac
}
# need_suite SCRIPT ARG (scripts whose first argument is a suite name): no
# argument: the usage, exit 1; another option: refused, exit 2.
need_suite() {
    help_asked "$1" "$2"
    case $2 in
    "")
        usage_of "$1"
        exit 1
        ;;
    -*)
        echo "$1: unknown option $2 (-h: usage)" >&2
        exit 2
        ;;
    esac
}
