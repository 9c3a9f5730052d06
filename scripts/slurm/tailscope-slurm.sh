# The shared part of tailscope's Slurm wrappers, sourced (never run) by tailscope-jobs and
# tailscope-between-jobs, which look for it beside themselves (beside the file a link in
# /etc/slurm/prolog.d/ points to): install it with them. POSIX sh (dash). Its names start with ts_ or are
# the functions below, so they never clash with a wrapper's own variables.
#
# Before sourcing it, a wrapper sets PATH (slurmd gives none), TS_TAG (the start of its log lines) and
# TS_PRIORITY (syslog's), and may set LOG (a file the log lines are appended to).

# say LINE: one line on stderr, in syslog (tag tailscope) and, where LOG= names a file, appended there
say() {
    ts_line="$TS_TAG: $*"
    echo "$ts_line" >&2
    logger -t tailscope -p "$TS_PRIORITY" "$ts_line" 2>/dev/null
    [ -n "$LOG" ] && echo "$(date '+%Y-%m-%dT%H:%M:%S') $ts_line" >> "$LOG" 2>/dev/null
    return 0
}

# read_conf FILE KEY...: FILE's KEY=VALUE lines into the shell variables of those names (PYTHONPATH is
# exported). The file is read, never run: a value is taken as it is written (`$(...)`, quotes and spaces
# included), and only the KEYs named can be set; '#' starts a comment line; an unknown key is said and
# skipped. A missing file sets nothing: the wrapper's defaults stand.
read_conf() {
    ts_conf=$1
    shift
    [ -r "$ts_conf" ] || return 0
    while IFS= read -r ts_row || [ -n "$ts_row" ]; do
        case "$ts_row" in '#'* | '') continue ;; esac
        ts_key=${ts_row%%=*}
        ts_value=${ts_row#*=}
        ts_known=
        for ts_name in "$@"; do
            [ "$ts_key" = "$ts_name" ] && ts_known=yes
        done
        if [ -z "$ts_known" ]; then
            say "$ts_conf: unknown key '$ts_key' (expected $(echo "$*" | sed 's/ /, /g'))"
            continue
        fi
        # ts_key is one of the caller's variable names (checked above): this sets that variable to the value
        eval "$ts_key=\$ts_value"
        [ "$ts_key" = PYTHONPATH ] && export PYTHONPATH
    done < "$ts_conf"
    return 0
}

# find_tailscope DIR: whether there is a tailscope to run, from the conf's PYTHON= (run as PYTHON -m
# tailscope, with PYTHONPATH= for a source tree) or TAILSCOPE=, else the first executable of DIR's tree's
# .venv (DIR/../../.venv/bin/tailscope), /usr/local/bin, /usr/bin, /opt/tailscope/bin and PATH, which it
# sets TAILSCOPE to. The wrapper then runs
#     if [ -n "$PYTHON" ]; then set -- "$PYTHON" -m tailscope; else set -- "$TAILSCOPE"; fi
# Returns 1, having said why, when there is none.
find_tailscope() {
    [ -n "$PYTHON" ] && return 0
    if [ -n "$TAILSCOPE" ]; then
        [ -x "$TAILSCOPE" ] && [ -f "$TAILSCOPE" ] && return 0
        say "no tailscope found: TAILSCOPE=$TAILSCOPE is not an executable file"
        return 1
    fi
    for ts_candidate in "$1/../../.venv/bin/tailscope" /usr/local/bin/tailscope /usr/bin/tailscope \
        /opt/tailscope/bin/tailscope; do
        if [ -x "$ts_candidate" ]; then
            TAILSCOPE=$ts_candidate
            return 0
        fi
    done
    TAILSCOPE=$(command -v tailscope 2>/dev/null) && [ -n "$TAILSCOPE" ] && return 0
    TAILSCOPE=
    say "no tailscope found (set TAILSCOPE= or PYTHON= in the .conf beside this script)"
    return 1
}
