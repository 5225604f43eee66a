# ami-auditor probe: static, read-only POSIX sh (dash/bash/busybox). Sent on stdin, run once.
# Its first line, added by the scanner, is `AMI_NONCE=<32 hex>`: a per-run secret every marker carries
# (auditor/collect/framing.py), so nothing a host prints can open, close or replace a section.
# It audits only the live host it runs on (images are read in Python, confined to their root:
# auditor/image/sections.py). Its sections (the `run NAME FUNC` lines at the end) are declared once in
# auditor/collect/section_list.py, checked by tests/unit/test_section_parity.py. Arguments: [--exec-versions]
# [--deep-cpu] then names or absolute paths of key binaries (validated by the caller); any other option
# is refused like a missing nonce: nothing on stdout, status 64.
# Binaries are fingerprinted, never run, unless --exec-versions (then only root-owned, root-only-writable
# files in a root-only-writable directory chain; see exec_refusal).
# Prints sections:  @@AMI-AUDITOR-SECTION <nonce> name@@ ... @@AMI-AUDITOR-END <nonce> name rc=N@@
# Never writes anything, never reads root memory.stat/memory.numa_stat (they walk dying memcgs).
# No host-controlled string is ever program text (sed/awk/grep patterns, printf formats, eval), and a
# host value printed inside a section never starts a line of its own (`one_line`/`put` fold newlines to `?`).
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PATH LC_ALL=C
NONCE=${AMI_NONCE:-}
unset AMI_NONCE  # never passed on to the programs the probe runs
case $NONCE in *[!0-9a-f]*|'') NONCE=bad ;; esac
if [ "${#NONCE}" -ne 32 ]; then
  echo "ami-auditor probe: the script must start with a valid AMI_NONCE line; refusing to run" >&2
  exit 64
fi
EXEC=0
DEEP_CPU=0
while :; do  # opt-in flags, in any order, before the binaries
  case ${1:-} in
    --exec-versions) EXEC=1; shift ;;
    --deep-cpu) DEEP_CPU=1; shift ;;
    *) break ;;
  esac
done
for a in "$@"; do  # binary names and paths only: a validated one never starts with `-`
  case $a in -*)
    printf 'ami-auditor probe: unknown option %s (it audits only the host it runs on); refusing to run\n' "$a" >&2
    exit 64 ;;
  esac
done
NL='
'
TAB='	'
nospace() { # nospace TEXT: TEXT with its spaces shown as `?` (the shell alone)
  _o=$1
  while :; do
    case $_o in *" "*) printf '%s?' "${_o%%" "*}"; _o=${_o#*" "} ;; *) break ;; esac
  done
  printf '%s' "$_o"
}
renice -n 19 -p $$ >/dev/null 2>&1
ionice -c 3 -p $$ >/dev/null 2>&1
umask 077

# within SECS CMD...: CMD killed after SECS seconds (status 124, or 137 if it ignores TERM); unbounded where
# the host has no `timeout`
if command -v timeout >/dev/null 2>&1; then
  within() { timeout -k 1 "$@"; }
else
  within() { shift; "$@"; }
fi
has() { command -v "$1" >/dev/null 2>&1; }
sec() { printf '@@AMI-AUDITOR-SECTION %s %s@@\n' "$NONCE" "$1"; }
end() { printf '\n@@AMI-AUDITOR-END %s %s rc=%s@@\n' "$NONCE" "$1" "$2"; }  # own line even after unterminated output
folded() { # folded TEXT: TEXT with its newlines shown as `?` (no newline added); the shell alone, so no
  # failing tool can blank a host value
  _o=$1
  while :; do
    case $_o in *"$NL"*) printf '%s?' "${_o%%"$NL"*}"; _o=${_o#*"$NL"} ;; *) break ;; esac
  done
  printf '%s' "$_o"
}
first() { printf '%s\n' "${1%%"$NL"*}"; }  # first TEXT: its first line (no tool that could fail)
one_line() { folded "$1"; echo; }  # one_line TEXT: TEXT as exactly one line
put() { printf '%s=' "$1"; one_line "$2"; }  # put KEY VALUE: one `KEY=VALUE` line, whatever VALUE holds
UNIT_FILES=
CPU_A=
CPU_B=
CPU_TA=
CPU_THREADS=
CPU_T0=0
SEC_RC=0
run() { # run NAME FUNC: one framed section; its status is FUNC's, or that of a command `fail` reported
  sec "$1"; SEC_RC=0; "$2"; _rc=$?; [ "$_rc" = 0 ] && _rc=$SEC_RC; end "$1" "$_rc"
}
catf() { # catf FILE: FILE's text; nothing (status 0) when it does not exist; a failing read fails
  [ -e "$1" ] || [ -L "$1" ] || return 0
  cat "$1"
}

# The probe's error model. Every command whose answer becomes a fact runs under `capture_or_fail` (the
# section fails), `stream_or_fail` (the same, output streamed) or `capture_or_fail_row` (one row fails):
# its exit status and first stderr line are kept (a `$(cmd)` or `cmd | filter` would lose them), and a
# command that exists but fails makes its section or row failed with that line as the reason, never an
# empty answer. `capture` alone keeps status and reason for a caller that decides (status 1 = no match).
# Capture, then filter.
# error_summary < stderr lines then a last line with the status: `@@cap <nonce>`, the status, the first stderr
# line not matching the fixed string $1 (bounded); a failure whose every stderr line matched $1 (a
# benign, named condition such as a file vanishing mid-walk) counts as success.
error_summary() {
  awk -v ign="${1:-}" -v n="$NONCE" '
    NR > 1 && prev != "" {
      if (ign != "" && index(prev, ign)) benign++
      else if (first == "") first = substr(prev, 1, 300)
    }
    { prev = $0 }
    END {
      rc = prev + 0
      if (rc != 0 && first == "" && benign > 0) rc = 0
      printf "\n@@cap %s\n%s\n%s", n, rc, first
    }'
}
CAP= CAP_RC=0 CAP_ERR=
capture_status() { # capture_status TEXT: CAP_RC and CAP_ERR from error_summary's tail at the end of TEXT
  case $1 in
    *"$NL@@cap $NONCE$NL"*) _t=${1##*"$NL@@cap $NONCE$NL"}; CAP_RC=${_t%%"$NL"*}; CAP_ERR=${_t#*"$NL"} ;;
    *) CAP_RC=255; CAP_ERR="no status came back (the status filter failed)" ;;  # fail closed
  esac
}
capture() { # capture [-i IGNORE] CMD...: run CMD once; CAP = its stdout (trailing newlines dropped), CAP_RC, CAP_ERR
  _ig=; [ "$1" = -i ] && { _ig=$2; shift 2; }
  _cr=$( { { "$@" 2>&1 >&3 3>&-; printf '\n%s\n' "$?"; } | error_summary "$_ig"; } 3>&1 )
  CAP=${_cr%"$NL@@cap $NONCE$NL"*}
  while :; do case $CAP in *"$NL") CAP=${CAP%"$NL"} ;; *) break ;; esac; done  # as `$(…)` drops them
  capture_status "$_cr"
}
why_failed() { # why_failed WHAT: FAIL_MSG says how WHAT failed (CAP_RC, CAP_ERR); FAIL_RC 124 timed out, else 1
  case $CAP_RC in
    124|137) FAIL_RC=124; FAIL_MSG="$1 timed out" ;;
    *) FAIL_RC=1
       if [ -n "$CAP_ERR" ]; then FAIL_MSG="$1: $CAP_ERR (status $CAP_RC)"
       else FAIL_MSG="$1 failed with status $CAP_RC"; fi ;;
  esac
}
fail() { # fail WHAT: this section failed because WHAT did: a nonce-framed line the parsers never see
  # (collect/sections.py takes it out of the body), and the section's status
  why_failed "$1"; SEC_RC=$FAIL_RC
  printf '@@AMI-AUDITOR-FAILED %s ' "$NONCE"; folded "$FAIL_MSG"; printf '@@\n'
}
capture_or_fail() { # capture_or_fail [-i IGNORE] WHAT CMD...: capture CMD; on failure `fail WHAT`, non-zero
  _ig=; [ "$1" = -i ] && { _ig=$2; shift 2; }
  _w=$1; shift
  capture -i "$_ig" "$@"
  [ "$CAP_RC" = 0 ] && return 0
  fail "$_w"; return 1
}
stream_or_fail() { # stream_or_fail [-i IGNORE] FILTER WHAT CMD...: CMD's stdout through FILTER (a function)
  # into the section, checked as capture_or_fail checks (for output too large to hold in a variable)
  _ig=; [ "$1" = -i ] && { _ig=$2; shift 2; }
  _f=$1; _w=$2; shift 2
  { _cr=$( { { { "$@" 2>&1 >&3 3>&- 4>&- 5>&-; printf '\n%s\n' "$?"; } | error_summary "$_ig" >&5; } 3>&1 |
           "$_f" >&4; } 5>&1 ); } 4>&1
  capture_status "$_cr"
  [ "$CAP_RC" = 0 ] && return 0
  fail "$_w"; return 1
}
capture_or_fail_row() { # capture_or_fail_row [-i IGNORE] WHAT CMD...: capture CMD for one row of a section
  # (one binary, one interface): on failure a `failed=` line in the row (its area fails, the other rows
  # stand) and non-zero
  _ig=; [ "$1" = -i ] && { _ig=$2; shift 2; }
  _w=$1; shift
  capture -i "$_ig" "$@"
  [ "$CAP_RC" = 0 ] && return 0
  why_failed "$_w"; put failed "$FAIL_MSG"; return 1
}
put_output() { # put_output KEY CMD...: one `KEY=value` line of what CMD prints (trailing newlines dropped,
  # others `?`); a failing CMD fails the section (capture_or_fail, its WHAT the command line)
  _k=$1; shift
  _c=$*; case $_c in "catf "*) _c="cat ${_c#catf }" ;; esac
  capture_or_fail "$_c" "$@"; put "$_k" "$CAP"
}

s_meta() {
  echo "probe_version=1"
  put uid "$(id -u)"
  put shell "$(readlink /proc/$$/exe 2>/dev/null)"
  printf 'date_epoch='; date +%s
}

s_identity() {
  put_output hostname catf /proc/sys/kernel/hostname
  put_output boot_id catf /proc/sys/kernel/random/boot_id
  put_output uptime catf /proc/uptime
  put_output machine_id catf /etc/machine-id
  # a container's clock, kernel and modules are its host's: systemd PID 1 names the manager here at boot
  # (systemd-nspawn, docker, lxc, podman). Not /.dockerenv: a VM whose root was a docker image keeps it.
  put_output container catf /run/systemd/container
  printf 'image_id_file='; (catf /etc/image-id | tr '\n' ' '); echo
}

s_cloudinit() { catf /run/cloud-init/instance-data.json; }

s_imds() {
  # IMDSv2 with a short timeout; only when curl exists. Prints key=value lines.
  has curl || return 3
  tok=$(within 3 curl -s -f -m 1 -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 60' \
        http://169.254.169.254/latest/api/token 2>/dev/null) || return 4
  for k in instance-id ami-id instance-type placement/availability-zone \
           placement/availability-zone-id placement/region; do
    v=$(within 3 curl -s -f -m 1 -H "X-aws-ec2-metadata-token: $tok" \
        "http://169.254.169.254/latest/meta-data/$k" 2>/dev/null) && put "$k" "$v"
  done
  return 0
}

s_os() {
  for f in /etc/os-release /usr/lib/os-release; do
    [ -e "$f" ] || continue
    capture_or_fail "cat $f" cat "$f" || return; printf '%s\n' "$CAP"; return 0
  done
  return 3
}

s_kernel() {
  put_output release uname -r
  put_output version uname -v
  put_output machine uname -m
  put_output cmdline catf /proc/cmdline
  put_output thp_enabled catf /sys/kernel/mm/transparent_hugepage/enabled
  put_output thp_defrag catf /sys/kernel/mm/transparent_hugepage/defrag
  capture_or_fail "cat /proc/meminfo" cat /proc/meminfo; printf '%s\n' "$CAP" | meminfo_kv
  capture_or_fail "cat /proc/driver/nvidia/version" catf /proc/driver/nvidia/version
  put nvidia_driver "${CAP%%"$NL"*}"
}

meminfo_kv() { # meminfo_kv < /proc/meminfo: `hugepages_total=N` and `mem_total_kb=N` (empty when absent)
  awk '/^HugePages_Total:/ {h = $2} /^MemTotal:/ {m = $2} END {print "hugepages_total=" h; print "mem_total_kb=" m}'
}

s_sysctl() {
  # One grep over the chosen set: prints /proc/sys/PATH:VALUE lines.
  cd /proc/sys 2>/dev/null || return 3
  # a key whose module is not loaded (bridge, conntrack) has no file: absent, not failed
  capture_or_fail -i 'No such file or directory' "grep /proc/sys" grep -H '' \
    kernel/pid_max kernel/threads-max kernel/panic kernel/numa_balancing \
    vm/swappiness vm/max_map_count vm/overcommit_memory vm/min_free_kbytes \
    vm/dirty_ratio vm/dirty_background_ratio vm/zone_reclaim_mode \
    net/core/somaxconn net/core/netdev_max_backlog net/core/rmem_max net/core/wmem_max \
    net/ipv4/ip_forward net/ipv4/tcp_keepalive_time net/ipv4/ip_local_port_range \
    net/netfilter/nf_conntrack_max net/bridge/bridge-nf-call-iptables \
    fs/file-max fs/inotify/max_user_watches fs/inotify/max_user_instances \
    net/ipv4/ip_local_reserved_ports net/netfilter/nf_conntrack_count \
    net/ipv4/conf/all/rp_filter net/ipv4/conf/default/rp_filter net/ipv6/conf/all/forwarding \
    net/ipv4/neigh/default/gc_thresh1 net/ipv4/neigh/default/gc_thresh2 net/ipv4/neigh/default/gc_thresh3 \
    kernel/keys/maxkeys kernel/keys/maxbytes fs/file-nr fs/nr_open kernel/panic_on_oops
  printf '%s\n' "$CAP"
  cd / || return 3
}

booted() { has systemctl && [ -d /run/systemd/system ]; }

s_systemd_version() {
  has systemctl || return 3
  capture_or_fail "systemctl --version" within 5 systemctl --version || return
  first "$CAP"
}

s_unit_files() {
  booted || return 3
  capture_or_fail "systemctl list-unit-files" within 10 systemctl list-unit-files --no-legend --no-pager || return
  UNIT_FILES=$CAP  # reused by s_units
  printf '%s\n' "$UNIT_FILES"
}

s_units() {
  # Runtime state of loaded services/sockets/timers plus enabled unit files, in one `show` call.
  booted || return 3
  capture_or_fail "systemctl list-units" within 10 systemctl list-units --all --no-legend --no-pager --plain \
    --type=service,socket,timer,mount,path || return
  capture_or_fail "unit names" unit_names "$CAP" "$UNIT_FILES" || return
  UNIT_NAMES=$CAP
  stream_or_fail cat "systemctl show" show_units
}
UNIT_NAMES=
unit_names() { # unit_names LIST_UNITS UNIT_FILES: loaded units and enabled unit files, once each, no templates
  printf '%s\n@@\n%s\n' "$1" "$2" | awk '
    $1 == "@@" { files = 1; next }
    files && $2 != "enabled" { next }
    $1 != "" && $1 !~ /@\./ && !seen[$1]++ { print $1 }'
}
show_units() { # the runtime state of UNIT_NAMES, each name one argument (NUL-separated for xargs; awk, whose
  # failure every `capture_or_fail` sees, rather than one more tool)
  printf '%s\n' "$UNIT_NAMES" | awk 'NF { printf "%s%c", $0, 0 }' | within 20 xargs -0 -r systemctl show \
    -p Id,Description,LoadState,ActiveState,SubState,Result,NRestarts,Restart,ExecMainPID \
    -p ExecMainStatus,ExecMainCode,ExecMainStartTimestampMonotonic,ActiveEnterTimestampMonotonic \
    -p FragmentPath,UnitFileState,UnitFilePreset,Type,StartLimitBurst --
}

s_restart_journal() {
  # Restart evidence from PID 1's journal this boot (the only source on systemd < 235).
  has journalctl || return 3
  stream_or_fail restart_tally "journalctl -b _PID=1" within 10 journalctl -b -q --no-pager -o cat _PID=1
}

restart_tally() { # restart_tally < PID 1's messages (-o cat): `UNIT COUNT` restarts per unit
  # Wording by systemd release: 219 `U holdoff time over, scheduling restart.` / `U has no holdoff time, …`;
  # ~225-234 `U: Service hold-off time over, …` / `U: Service has no hold-off time, …`; 235+ also
  # `U: Service RestartSec=… expired, …` and, for the same restart, `U: Scheduled restart job, restart
  # counter is at N.` Each restart is counted once: the larger of the two tallies.
  awk '/, scheduling restart/ && (/hold-?off time/ || /RestartSec=/) { u = $1; sub(/:$/, "", u); h[u]++ }
       /: Scheduled restart job/ { u = $1; sub(/:$/, "", u); s[u]++ }
       END { for (u in h) if (s[u] + 0 < h[u]) s[u] = h[u]
             for (u in s) print u, s[u] }'
}

s_cgroups() {
  capture_or_fail "stat -f /sys/fs/cgroup" stat -fc %T /sys/fs/cgroup; put fstype "$CAP"
  capture stat -fc %T /sys/fs/cgroup/unified; put unified_fstype "$CAP"  # absent on v1 and v2: no fact to fail
  echo '--- proc_cgroups'
  capture_or_fail "cat /proc/cgroups" catf /proc/cgroups; printf '%s\n' "$CAP"
  echo '--- v1_live'
  # v1 hierarchies only (they have a `tasks` file); one walk for all, following the top-level links
  # (cpu -> cpu,cpuacct) with -H. O(live cgroups); never touches memory.stat.
  v1=
  for c in memory pids cpu cpuacct blkio devices freezer cpuset; do
    [ -f "/sys/fs/cgroup/$c/tasks" ] && v1="$v1 $c"
  done
  if [ -n "$v1" ]; then
    # shellcheck disable=SC2086  # $v1 is a list of fixed controller names
    stream_or_fail -i 'No such file or directory' count_dirs "find /sys/fs/cgroup" v1_dirs $v1
  fi
  echo '--- v2_stat'
  if [ -r /sys/fs/cgroup/cgroup.stat ]; then
    for f in /sys/fs/cgroup/cgroup.stat /sys/fs/cgroup/*.slice/cgroup.stat \
             /sys/fs/cgroup/kubepods*/cgroup.stat; do
      [ -r "$f" ] || continue
      one_line "@ ${f#/sys/fs/cgroup/}"
      capture_or_fail "cat $f" cat "$f"; printf '%s\n' "$CAP"
    done
    echo '--- v2_controllers'
    capture_or_fail "cat cgroup.controllers" catf /sys/fs/cgroup/cgroup.controllers; printf '%s\n' "$CAP"
  fi
  return 0
}
v1_dirs() { # v1_dirs CONTROLLER...: every cgroup directory of those v1 hierarchies (a cgroup removed
  # mid-walk, as a crash loop does every few seconds, is no failure: `stream_or_fail -i` above)
  cd /sys/fs/cgroup && within 20 find -H "$@" -type d
}
count_dirs() { awk -F/ '{n[$1]++} END {for (c in n) print c, n[c]}'; }  # count_dirs < paths: `CONTROLLER COUNT`

unsafe_owner() { # unsafe_owner PATH: why PATH is not root-owned and root-only-writable (nothing when it is)
  _s=$(stat -c '%u %a' "$1" 2>/dev/null) || { printf 'cannot stat %s' "$1"; return 0; }
  _u=${_s%% *}; _m=${_s#* }
  if [ "$_u" != 0 ]; then printf '%s is owned by uid %s, not root' "$1" "$_u"; return 0; fi
  case $_m in *[2367]?|*[2367]) printf '%s is group- or world-writable (mode %s)' "$1" "$_m" ;; esac
  return 0
}

exec_refusal() { # exec_refusal FILE: why FILE (resolved) may not be run as root; nothing when it may
  case $1 in /*) ;; *) printf 'path could not be resolved'; return 0 ;; esac
  [ -f "$1" ] || { printf '%s is not a regular file' "$1"; return 0; }
  [ -x "$1" ] || { printf '%s is not executable' "$1"; return 0; }
  _w=$(unsafe_owner "$1"); [ -n "$_w" ] && { printf '%s' "$_w"; return 0; }
  _d=${1%/*}
  while :; do
    _w=$(unsafe_owner "${_d:-/}"); [ -n "$_w" ] && { printf 'directory %s' "$_w"; return 0; }
    [ -n "$_d" ] || return 0
    _d=${_d%/*}
  done
}

dpkg_owner_of() { # dpkg_owner_of < `dpkg-query -S` output: the owner field of the first owner line
  # (`pkg`, `pkg:arch` or `pkg-a, pkg-b`); diversion lines (`diversion by P from: F`, `diversion by P to: F`,
  # `local diversion from: F`, `local diversion to: F`) name no owner.
  awk '!/^diversion by / && !/^local diversion / { sub(/: .*/, ""); print; exit }'
}

s_binaries() {
  # One block per requested binary: path, stat, sha256, owner package and its version, URL evidence.
  # Never runs a binary unless --exec-versions, and then only what exec_refusal allows.
  for b in "$@"; do
    printf '@ %s\n' "$b"
    case $b in
      /*) p=$b ;;
      *) p=
         p=$(command -v "$b" 2>/dev/null)
         alt=$b; [ "$b" = ecs-init ] && alt=amazon-ecs-init  # ecs-init installs /usr/libexec/amazon-ecs-init
         if [ -z "$p" ]; then
           for d in /usr/local/bin /usr/bin /usr/sbin /usr/local/sbin /bin /sbin /usr/libexec \
                    /opt/bin /snap/bin; do
             [ -x "$d/$b" ] && p=$d/$b && break
             [ -x "$d/$alt" ] && p=$d/$alt && break
           done
         fi ;;
    esac
    if [ -z "$p" ] || [ ! -f "$p" ]; then echo "found=0"; continue; fi
    echo "found=1"
    put path "$p"
    capture_or_fail_row "readlink -f" readlink -f "$p"; rp=$CAP
    put realpath "$rp"
    capture_or_fail_row stat stat -Lc '%s %Y %d %i %a %U' "$p"; put stat "$CAP"
    capture_or_fail_row "sha256 not computed: sha256sum" sha256_of "$p" || CAP=
    put sha256 "${CAP%% *}"
    v= src=none
    if has dpkg-query && [ -d /var/lib/dpkg ]; then
      # one query for the path, its merged-/usr twin and its resolved target
      case $p in /usr/*) tw=${p#/usr} ;; *) tw=/usr$p ;; esac
      # a path no package owns is an answer (`no path found matching pattern`), not a failure
      capture_or_fail_row -i 'no path found matching pattern' "dpkg-query -S" owner_query "$p" "$tw" "${rp:-$p}" || CAP=
      o=$(printf '%s\n' "$CAP" | dpkg_owner_of)
      if [ -n "$o" ]; then
        put dpkg_owner "$o"
        o=${o%%,*}
        capture_or_fail_row "dpkg-query -W $o" within 10 dpkg-query -W -f='${Version}' -- "$o" || CAP=
        v=${CAP%%"$NL"*}
        put dpkg_version "$v"
      fi
    fi
    if has rpm; then
      capture within 10 rpm -qf --qf '%{NAME}\t%{VERSION}-%{RELEASE}\t%{VENDOR}\n' "$p"
      o=${CAP%%"$NL"*}
      case $CAP_RC:$CAP in
        1:*"not owned"*) ;;  # an answer: no package owns it (rpm says so on stdout, status 1)
        0:?*) put rpm_owner "$o"; o=${o#*"	"}; v=${o%%"	"*} ;;
        *) why_failed "rpm -qf"; put failed "$FAIL_MSG" ;;
      esac
    fi
    [ -n "$v" ] && src=package
    why=
    if [ "$EXEC" = 1 ]; then
      case ${p##*/} in
        kubelet|kubectl|kube-proxy|containerd|dockerd|docker|runc|crictl|nvidia-container-runtime|nvidia-smi)
          why=$(exec_refusal "$rp") ;;
        *) why="no known version flag for ${p##*/}" ;;
      esac
      if [ -z "$why" ]; then
        case ${p##*/} in
          nvidia-smi) capture_or_fail_row "$rp --version" within 5 "$rp" --version &&
                        ev=$(printf '%s\n' "$CAP" | awk 'tolower($0) ~ /driver version/ { print; exit }') ;;
          *) capture_or_fail_row "$rp --version" within 3 "$rp" --version && ev=${CAP%%"$NL"*} ;;
        esac
        [ -n "$ev" ] && v=$ev && src=exec
      fi
    fi
    put version "$v"
    printf 'version_source=%s\n' "$src"
    [ -n "$why" ] && put version_refused "$why"
    n=${p##*/}
    nre=$(printf '%s' "$n" | awk '{ gsub(/[.+]/, "[&]"); printf "%s", $0 }')  # the validated name, literal in the ERE below
    [ -n "$nre" ] || { CAP_RC=1 CAP_ERR="could not be quoted"; why_failed "binary name $n"; put failed "$FAIL_MSG"; }
    for f in /var/log/cloud-init-output.log /var/lib/cloud/instance/user-data.txt \
             /var/lib/cloud/instance/scripts/* /etc/eks/release /var/log/user-data.log; do
      [ -f "$f" ] && [ -r "$f" ] || continue  # files only: a directory there is nothing to search
      fq=$(folded "$f"); fq=$(nospace "$fq")  # a host-chosen file name: data only, one field
      # grep: status 1 is "no match", an answer; -m 5 stops at the 5 lines the first 5 matches come from
      capture within 5 grep -m 5 -ohE "(https?|s3)://[^ \"'<>]*/$nre([.][A-Za-z0-9]+)?([ \"'<>]|\$)" "$f"
      case $CAP_RC in 0|1) ;; *) why_failed "grep $fq"; put failed "$FAIL_MSG" ;; esac
      k=0
      printf '%s\n' "$CAP" | while IFS= read -r u; do  # the first 5 (builtins only: nothing here can fail)
        [ -n "$u" ] || continue
        k=$((k + 1)); [ "$k" -le 5 ] || break
        printf 'url=%s %s\n' "$fq" "$u"
      done
    done
  done
  return 0
}

fingerprint() { printf '%s' "$1" | base64 -d 2>/dev/null | within 5 sha256sum; }  # fingerprint BASE64: of its bytes
owner_query() { # owner_query PATH...: dpkg-query -S for the paths a package could own (dpkg lists one path a
  # line, so none with a newline: asking would only print the host's name back over several lines)
  _n=$#
  for x in "$@"; do case $x in *"$NL"*) ;; *) set -- "$@" "$x" ;; esac; done
  shift "$_n"
  [ "$#" -gt 0 ] || return 0
  within 10 dpkg-query -S "$@"
}
sha256_of() { within 20 sha256sum < "$1"; }  # sha256_of FILE: `DIGEST  -` (never the host-chosen name)

s_eks() { capture_or_fail "cat /etc/eks/release" catf /etc/eks/release; printf '%s\n' "$CAP"; }

ecs_exits() { # ecs_exits < ecs-init.log: how many `Agent exited with code N` lines (ecs-init's supervisor
  # loop, engine.go), then `last_exit=` the newest one
  awk '/Agent exited with code/ {n++; last = $0} END {print n + 0; if (n) print "last_exit=" last}'
}

s_ecs() {
  if [ -r /etc/ecs/ecs.config ]; then
    echo "config_present=1"
    capture grep -E '^[[:space:]]*ECS_CLUSTER=' /etc/ecs/ecs.config  # status 1: no such line, an answer
    case $CAP_RC in 0|1) ;; *) fail "grep /etc/ecs/ecs.config" ;; esac
    printf '%s\n' "$CAP" | awk 'NF { l = $0 } END { if (l != "") { sub(/^[[:space:]]*/, "", l); print "cluster_line=" l } }'
  else
    echo "config_present=0"
  fi
  for f in /var/log/ecs/ecs-init.log /var/log/ecs/ecs-init.log.*; do
    [ -f "$f" ] && [ -r "$f" ] || continue
    capture_or_fail "read $f" ecs_exits_of "$f" || continue
    printf 'log='; folded "$f"; printf ' '
    printf '%s\n' "$CAP"
  done
  if has docker; then
    capture within 5 docker inspect -f 'agent_started={{.State.StartedAt}} agent_status={{.State.Status}} agent_restarts={{.RestartCount}}' ecs-agent
    case $CAP_RC:$CAP_ERR in
      0:*) printf '%s\n' "$CAP" ;;
      *"No such object"*) ;;  # no agent container: an answer
      *"Cannot connect to the Docker daemon"*) echo "docker_daemon=not running" ;;  # an answer too
      *) fail "docker inspect ecs-agent" ;;
    esac
  fi
  return 0
}
ecs_exits_of() { ecs_exits < "$1"; }

denied() { # denied FACT PATH: the probe's user may not read PATH (no root): FACT fails by name, and only FACT
  # (a FAILED line; the section's status stays 0, so its other facts stand: collectors.py `_partial`)
  printf '@@AMI-AUDITOR-FAILED %s %s not read: ' "$NONCE" "$1"; folded "$2"; printf ': Permission denied@@\n'
}
searchable() { # searchable DIR FACT...: 0 when DIR is absent or may be entered; else each FACT is denied
  _sd=$1; shift
  [ -d "$_sd" ] || return 0
  [ -x "$_sd" ] && return 0
  for _sf in "$@"; do denied "$_sf" "$_sd"; done
  return 1
}
s_hygiene() {
  # What an image must not carry (rules/image.yaml), as metadata only: paths, sizes, counts, kinds and
  # host key fingerprints (of the public half). No private key, history, credential or token content is
  # ever printed: greps here only answer yes/no (-q) or a count (-c). Paths come last on a line, one line.
  # Run without root, a file or directory it may not read is that fact's failure (`denied`), never "none".
  echo "image=0"
  CAP=
  if [ -d /var/lib/cloud/instances ] && ! [ -r /var/lib/cloud/instances ]; then
    denied cloud_init_instances /var/lib/cloud/instances
  else
    [ -d /var/lib/cloud/instances ] && capture_or_fail "ls /var/lib/cloud/instances" ls -A /var/lib/cloud/instances
    printf 'cloud_instances='; printf '%s' "$CAP" | grep -c .
  fi
  m=absent
  if [ -f /etc/machine-id ] && ! [ -r /etc/machine-id ]; then
    m=; denied machine_id_state /etc/machine-id
  elif [ -f /etc/machine-id ]; then
    capture_or_fail "read /etc/machine-id" head -c 64 /etc/machine-id
    case ${CAP%%"$NL"*} in
      *uninitialized*) m=uninitialized ;; *[!"$TAB "]*) m=populated ;; *) m=empty ;;
    esac
  fi
  [ -n "$m" ] && printf 'machine_id_state=%s\n' "$m"
  for f in /etc/ssh/ssh_host_*_key; do
    [ -f "$f" ] || continue
    t=${f##*/ssh_host_}; t=${t%_key}
    b=$(head -c 65536 "$f.pub" 2>/dev/null | awk 'NR == 1 {print $2; exit}')
    case $b in
      ''|*[!A-Za-z0-9+/=]*) fp=- ;;
      *) capture_or_fail "sha256sum of $(folded "$f").pub" fingerprint "$b"; fp=${CAP%% *} ;;
    esac
    case $t in *"$TAB"*|*"$NL"*) t=unknown ;; esac  # a name the key type cannot be read from
    printf 'key\t%s\t%s\t' "$t" "$fp"; one_line "$f"
  done
  if searchable /root root_authorized_keys && searchable /root/.ssh root_authorized_keys; then
    for f in /root/.ssh/authorized_keys /root/.ssh/authorized_keys2; do
      [ -f "$f" ] || continue
      [ -r "$f" ] || { denied root_authorized_keys "$f"; continue; }
      capture grep -cvE '^[[:space:]]*(#|$)' "$f"  # status 1: a count of 0, an answer
      case $CAP_RC in 0|1) ;; *) fail "grep $(folded "$f")" ;; esac
      printf 'authorized\t%s\t' "$CAP"; one_line "$f"
    done
  fi
  for h in /root /home/*; do
    [ -d "$h" ] || continue
    searchable "$h" shell_histories credential_files || continue
    for n in .bash_history .zsh_history .ash_history .sh_history .python_history .mysql_history \
             .psql_history .lesshst .viminfo; do
      [ -f "$h/$n" ] || continue
      capture_or_fail "stat $(folded "$h/$n")" stat -c '%s' "$h/$n"
      printf 'history\t%s\t' "$CAP"; one_line "$h/$n"
    done
    if searchable "$h/.aws" credential_files; then
      [ -s "$h/.aws/credentials" ] && { printf 'credential\taws-credentials\t'; one_line "$h/.aws/credentials"; }
      if [ -f "$h/.aws/config" ] && ! [ -r "$h/.aws/config" ]; then denied credential_files "$h/.aws/config"
      else
        [ -f "$h/.aws/config" ] && head -c 1048576 "$h/.aws/config" |
          grep -qiE '^[[:space:]]*aws_(secret_access_key|session_token)[[:space:]]*=' &&
          { printf 'credential\taws-credentials\t'; one_line "$h/.aws/config"; }
      fi
    fi
    [ -s "$h/.netrc" ] && { printf 'credential\tnetrc\t'; one_line "$h/.netrc"; }
    [ -s "$h/.git-credentials" ] && { printf 'credential\tgit-credentials\t'; one_line "$h/.git-credentials"; }
    [ -s "$h/.pgpass" ] && { printf 'credential\tpgpass\t'; one_line "$h/.pgpass"; }
    if searchable "$h/.docker" credential_files; then
      if [ -f "$h/.docker/config.json" ] && ! [ -r "$h/.docker/config.json" ]; then
        denied credential_files "$h/.docker/config.json"
      else
        [ -f "$h/.docker/config.json" ] && head -c 1048576 "$h/.docker/config.json" | grep -q '"auth"' &&
          { printf 'credential\tdocker-auth\t'; one_line "$h/.docker/config.json"; }
      fi
    fi
  done
  for f in /etc/environment /etc/default/* /etc/sysconfig/* /etc/profile.d/*.sh /etc/ecs/ecs.config; do
    [ -f "$f" ] || continue
    [ -r "$f" ] || { denied credential_files "$f"; continue; }
    head -c 1048576 "$f" 2>/dev/null | grep -qE 'A(KI|SI)A[0-9A-Z]{16}' &&
      { printf 'credential\taws-access-key-id\t'; one_line "$f"; }
    head -c 1048576 "$f" 2>/dev/null |
      grep -qE '^[[:space:]]*(export[[:space:]]+)?[A-Z0-9_]*(SECRET|TOKEN|PASSWORD|PASSWD|API_KEY|AUTH_DATA)[A-Z0-9_]*[[:space:]]*=[[:space:]]*[^[:space:]]' &&
      { printf 'credential\tsecret-variable\t'; one_line "$f"; }
  done
  for d in /var/cache/apt /var/lib/apt/lists /var/cache/yum /var/cache/dnf; do
    [ -d "$d" ] || continue
    kb=
    capture -i 'No such file or directory' within 10 du -sk "$d"  # a file removed mid-walk: no failure
    case $CAP_RC in
      0) kb=${CAP%%"$TAB"*}
         case $kb in ''|*[!0-9]*) kb=; CAP_RC=1 CAP_ERR="printed no size"; fail "du -sk $d" ;; esac ;;
      124|137) fail "du -sk $d" ;;
      *) case $CAP_ERR in  # a directory du may not read (apt's `partial`, 0700 _apt): that size alone is unknown
           *"Permission denied"*)
             printf '@@AMI-AUDITOR-FAILED %s package_caches not read: ' "$NONCE"; folded "$d: $CAP_ERR"; printf '@@\n' ;;
           *) fail "du -sk $d" ;;
         esac ;;
    esac
    printf 'cache\t%s\t' "$kb"; one_line "$d"
  done
  return 0
}

info_lines() { sed 's/^/info /'; }  # info_lines < `ethtool -i` output
stat_lines() { # stat_lines < `ethtool -S` output: `stat NAME COUNT` for each counter
  sed -n 's/^[[:space:]]*\([A-Za-z0-9_]*\): \([0-9-]*\)$/stat \1 \2/p'
}

s_network() {
  for i in /sys/class/net/*; do
    n=${i##*/}
    [ "$n" = lo ] && continue
    # the driver's module (ena), or the driver itself when it is built into the kernel (virtio_net);
    # neither link: a virtual device, no driver
    CAP=
    for l in "$i/device/driver/module" "$i/device/driver"; do
      [ -L "$l" ] || continue
      capture_or_fail "readlink $l" readlink "$l"; break
    done
    drv=${CAP##*/}
    capture_or_fail "cat $i/operstate" catf "$i/operstate"; st=$CAP
    capture_or_fail "cat $i/mtu" catf "$i/mtu"
    one_line "@ $n driver=${drv:-none} operstate=$st mtu=$CAP"
    [ -n "$drv" ] || continue
    has ethtool || { echo "ethtool=absent"; continue; }  # not installed: no driver details, an answer
    # a failing ethtool fails this interface's row (`failed=`); a device without them has no stats
    capture_or_fail_row "ethtool -i $n" within 3 ethtool -i "$n" && printf '%s\n' "$CAP" | info_lines
    capture within 3 ethtool -S "$n"
    case $CAP_RC:$CAP_ERR:$CAP in
      0:*) _s=$(printf '%s\n' "$CAP" | stat_lines)  # answered: counters, or output that is none
           if [ -n "$_s" ]; then printf '%s\n' "$_s"; else put failed "ethtool -S $n printed no counter"; fi ;;
      *"no stats available"*|*"Operation not supported"*) echo "stats=unsupported" ;;
      *) why_failed "ethtool -S $n"; put failed "$FAIL_MSG" ;;
    esac
  done
  echo '@ '  # the interface blocks end here (a bare `@ ` names no interface)
  capture_or_fail "cat /sys/module/ena/version" catf /sys/module/ena/version; put ena_module_version "$CAP"
  # in-tree drivers without a version of their own report the kernel release in `ethtool -i`
  put_output kernel_release uname -r
  return 0
}

s_kernel_log() {
  # Driver trouble only (ENA resets, watchdogs, OOM), newest last, bounded. The journal first; dmesg when
  # there is no journalctl or it fails (the section fails only when neither can be read).
  if has journalctl; then
    capture within 10 journalctl -k -b -q --no-pager -o short-monotonic
    if [ "$CAP_RC" = 0 ]; then printf '%s\n' "$CAP" | trouble_lines; return 0; fi
  fi
  has dmesg || { fail "journalctl -k"; return; }
  stream_or_fail trouble_lines dmesg within 10 dmesg
}

trouble_lines() { # trouble_lines < kernel log: the newest 200 lines naming driver trouble
  pat='NVRM: Xid|NVRM: GPU at [^ ]* has fallen off the bus|fallen off the bus|SXid|[Nn]eighbou?r table overflow|unregister_netdevice: waiting for|nf_conntrack: table full|fork rejected by pids controller|VFS: file-max limit|Remounting filesystem read-only|EXT4-fs error|XFS .*Shutting down|Buffer I/O error|upper fs needs to support d_type|TX q [0-9]* is paused|napi handler hasn.t been called|Keep alive watchdog timeout|Trigger reset is on|Reset the device|Resetting the device|Device reset completed|ena .*[Rr]eset|Found a Tx that wasn.t completed on time|lost tx completions is above the threshold|Lost TX completions are above the threshold|ena_com_wait_and_process_admin_cq|NETDEV WATCHDOG|[Oo]ut of memory[^:]*: Kill|soft lockup|hung_task|blocked for more than'
  grep -E "$pat" | tail -n 200
}

s_unit_limits() {
  # The limits in force (defaults included) of the services Kubernetes and GPU nodes break on: one call.
  booted || return 3
  capture_or_fail "systemctl show limits" within 5 systemctl show -p Id,LoadState,LimitNOFILE,LimitNOFILESoft,TasksMax \
    containerd.service docker.service kubelet.service nvidia-persistenced.service nvidia-fabricmanager.service \
    || return
  printf '%s\n' "$CAP"
}

# Configuration files, read as text for the parsers (collect/parsers/config.py): comment and blank lines left
# out, assignments to password/secret/token/auth keys never printed, each file capped at CONF_MAX bytes, each
# line prefixed `|` so none can start a header. The file list is collect/config_files.py's (a test checks).
CONF_MAX=16384
conf_lines() { # conf_lines FILE: FILE's lines that are not comments, blanks or secrets; none left is an answer
  within 5 grep -v -i -E -e '^[[:space:]]*([#;]|//|$)' \
    -e '^[[:space:]]*[a-z_]*(password|passwd|secret|token|auth)[a-z_]*[[:space:]]*=' -- "$1"; _r=$?
  [ "$_r" = 1 ] && return 0
  return "$_r"
}
conf_read() { # conf_read FILE: conf_lines prefixed `|`, at most CONF_MAX bytes then `!truncated`; grep's status
  { conf_lines "$1"; printf '\n@@rc %s %s\n' "$NONCE" "$?"; } | awk -v max="$CONF_MAX" -v m="@@rc $NONCE " '
    index($0, m) == 1 { rc = substr($0, length(m) + 1) + 0; next }
    $0 == "" { next }
    { n += length($0) + 1; if (n <= max) print "|" $0; else if (!cut++) print "!truncated" }
    END { exit rc }'
}
CONF_SEEN=
conf_file() { # conf_file KIND FILE: one `@ KIND FILE` block (a failed read is that block's `failed=` line)
  [ -f "$2" ] || return 0
  case $NL$CONF_SEEN$NL in *"$NL$2$NL"*) return 0 ;; esac  # once each (a unit's --config may name a default)
  CONF_SEEN=$CONF_SEEN$NL$2
  printf '@ %s ' "$1"; one_line "$2"
  capture_or_fail_row "read $(folded "$2")" conf_read "$2" || return 0
  [ -n "$CAP" ] && printf '%s\n' "$CAP"
  case $1:$2 in kubelet-env:*|unit:*/kubelet.service|unit:*/kubelet.service.d/*) KUBELET_TEXT=$KUBELET_TEXT$NL$CAP ;; esac
  return 0
}
conf_glob() { # conf_glob KIND PATTERN...: conf_file for each regular file a pattern matches (64 a pattern)
  _ck=$1; shift
  for _cp in "$@"; do
    case $_cp in /lib/*) [ -L /lib ] && continue ;; esac  # merged /usr: the same files as /usr/lib
    _cn=0
    for _cf in $_cp; do  # fixed patterns: globbed, never split
      [ -f "$_cf" ] || continue
      _cn=$((_cn + 1)); [ "$_cn" -le 64 ] || break
      conf_file "$_ck" "$_cf"
    done
  done
}
KUBELET_TEXT=
s_config() {
  conf_glob sysctl '/etc/sysctl.d/*.conf' '/run/sysctl.d/*.conf' '/usr/local/lib/sysctl.d/*.conf' \
    '/usr/lib/sysctl.d/*.conf' '/lib/sysctl.d/*.conf' /etc/sysctl.conf
  conf_glob networkd /etc/systemd/networkd.conf /usr/lib/systemd/networkd.conf \
    '/etc/systemd/networkd.conf.d/*.conf' '/run/systemd/networkd.conf.d/*.conf' \
    '/usr/local/lib/systemd/networkd.conf.d/*.conf' '/usr/lib/systemd/networkd.conf.d/*.conf' \
    '/lib/systemd/networkd.conf.d/*.conf'
  conf_glob link '/etc/systemd/network/*.link' '/run/systemd/network/*.link' '/usr/local/lib/systemd/network/*.link' \
    '/usr/lib/systemd/network/*.link' '/lib/systemd/network/*.link' '/etc/systemd/network/*.link.d/*.conf' \
    '/run/systemd/network/*.link.d/*.conf' '/usr/local/lib/systemd/network/*.link.d/*.conf' \
    '/usr/lib/systemd/network/*.link.d/*.conf' '/lib/systemd/network/*.link.d/*.conf'
  conf_glob apt /etc/apt/apt.conf '/etc/apt/apt.conf.d/*'
  conf_glob dnf-automatic /etc/dnf/automatic.conf
  conf_glob yum-cron /etc/yum/yum-cron.conf
  conf_glob containerd /etc/containerd/config.toml '/etc/containerd/conf.d/*.toml'
  conf_glob docker /etc/docker/daemon.json
  for _u in kubelet containerd docker nvidia-persistenced nvidia-fabricmanager; do
    for _d in /etc/systemd/system /run/systemd/system /usr/local/lib/systemd/system /usr/lib/systemd/system \
              /lib/systemd/system; do
      conf_glob unit "$_d/$_u.service" "$_d/$_u.service.d/*.conf"
    done
  done
  conf_glob kubelet-env /var/lib/kubelet/kubeadm-flags.env /etc/default/kubelet /etc/sysconfig/kubelet \
    /etc/eks/kubelet/environment
  conf_glob kubelet /var/lib/kubelet/config.yaml /etc/kubernetes/kubelet/config.json \
    /etc/kubernetes/kubelet/kubelet-config.json /etc/kubernetes/kubelet-config.yaml \
    '/etc/kubernetes/kubelet/config.json.d/*.conf'
  # the file the kubelet unit's --config names (a YAML or JSON file under /etc, /var/lib or /run)
  for _f in $(kubelet_config_flag); do conf_file kubelet "$_f"; done
  conf_glob resolv /etc/resolv.conf
  [ -L /etc/resolv.conf ] && capture_or_fail "readlink /etc/resolv.conf" readlink /etc/resolv.conf &&
    put resolv_link "$CAP"
  conf_glob cni '/etc/cni/net.d/*'
  conf_glob modules-load '/etc/modules-load.d/*.conf' '/run/modules-load.d/*.conf' \
    '/usr/local/lib/modules-load.d/*.conf' '/usr/lib/modules-load.d/*.conf' '/lib/modules-load.d/*.conf' \
    /etc/modules
  return 0
}
kubelet_config_flag() { # the files `--config` names in the kubelet unit and environment files read above
  printf '%s\n' "$KUBELET_TEXT" | awk '{
      s = $0
      while (match(s, /--config[= ]+[^ "\047$]+/)) {
        v = substr(s, RSTART, RLENGTH); s = substr(s, RSTART + RLENGTH); sub(/^--config[= ]+/, "", v)
        if (v ~ /^\/(etc|var\/lib|run)\/[A-Za-z0-9_.\/-]+\.(ya?ml|json|conf)$/ && v !~ /\.\./ && !seen[v]++) print v
      }
    }'
}

s_kernels() {
  # Installed kernels and which have an NVIDIA module built for them (the next boot's kernel needs one).
  for d in /lib/modules/*; do
    [ -d "$d" ] || continue
    printf 'release '; one_line "${d##*/}"
  done
  [ -d /lib/modules ] || return 0
  capture_or_fail "find /lib/modules" within 10 find /lib/modules -mindepth 2 -maxdepth 5 -name 'nvidia.ko*' || return
  [ -n "$CAP" ] && printf '%s\n' "$CAP" | awk -F/ 'NF > 3 && !seen[$4]++ { print "nvidia " $4 }'
  return 0
}

s_gpu() {
  # NVIDIA devices on the PCI bus, what the driver sees, and the modules GPUDirect needs (builtins only).
  g=0 s=0
  for d in /sys/bus/pci/devices/*; do
    [ -r "$d/vendor" ] || continue
    read -r v < "$d/vendor" || continue
    [ "$v" = 0x10de ] || continue
    read -r c < "$d/class" || continue
    case $c in 0x0300*|0x0302*) g=$((g + 1)) ;; 0x0680*) s=$((s + 1)) ;; esac
  done
  printf 'pci_gpus=%s\npci_nvswitches=%s\n' "$g" "$s"
  if [ -d /proc/driver/nvidia/gpus ]; then
    n=0; for d in /proc/driver/nvidia/gpus/*; do [ -e "$d" ] && n=$((n + 1)); done
    printf 'driver_gpus=%s\n' "$n"
  fi
  put_output module_version catf /sys/module/nvidia/version
  for m in nvidia nvidia_uvm nvidia_modeset nvidia_peermem efa_nv_peermem nv_peer_mem efa ib_core; do
    [ -d "/sys/module/$m" ] && printf 'module=%s\n' "$m"
  done
  n=0; for d in /sys/class/infiniband/*; do [ -e "$d" ] && n=$((n + 1)); done
  printf 'infiniband_devices=%s\n' "$n"
  if [ -r /proc/driver/nvidia/params ]; then
    capture grep -m 1 '^EnableGpuFirmware' /proc/driver/nvidia/params  # status 1: no such line, an answer
    case $CAP_RC in 0) put gsp "$CAP" ;; 1) ;; *) fail "grep /proc/driver/nvidia/params" ;; esac
  fi
  return 0
}

chrony_state() { # chrony_state < `chronyc tracking`: `ntp_synchronized=yes|no` from its Leap status line
  awk -F': *' '$1 ~ /^Leap status/ { print "ntp_synchronized=" ($2 ~ /Not synchronised/ ? "no" : "yes"); n++; exit }
    END { if (!n) print "ntp_synchronized=unreadable" }'
}

s_proc() {
  echo '--- swaps'
  capture_or_fail "cat /proc/swaps" catf /proc/swaps && printf '%s\n' "$CAP" | awk 'NR > 1 && NF { print $1 }'
  echo '--- state'
  put_output clocksource catf /sys/devices/system/clocksource/clocksource0/current_clocksource
  put_output clocksources catf /sys/devices/system/clocksource/clocksource0/available_clocksource
  capture_or_fail "read /proc/net/arp" awk 'END { print "arp_entries=" (NR > 0 ? NR - 1 : 0) }' /proc/net/arp &&
    printf '%s\n' "$CAP"
  # Clock sync as the time daemons say it, asking none that is not running (timedatectl would start
  # systemd-timedated, which the next scan would see): timesyncd's flag file (systemd >= 239), else chronyc.
  if [ -e /run/systemd/timesync/synchronized ]; then
    printf 'ntp_source=timesyncd\nntp_synchronized=yes\n'
  elif has chronyc; then
    capture within 3 chronyc -n tracking
    case $CAP_RC:$CAP_ERR:$CAP in
      0:*) echo ntp_source=chrony; printf '%s\n' "$CAP" | chrony_state ;;
      *"Cannot talk to daemon"*) ;;  # chrony installed, chronyd not running: nothing to ask, an answer
      *) fail "chronyc tracking" ;;
    esac
  fi
  [ -e /var/run/reboot-required ] && echo reboot_required=1
  [ -f /var/run/reboot-required.pkgs ] &&
    capture_or_fail "read reboot-required.pkgs" head -c 1024 /var/run/reboot-required.pkgs &&
    printf '%s\n' "$CAP" | awk 'NF { printf "reboot_pkg=%s\n", $1 }'
  echo '--- tasks'
  # From cpu_begin's walk of /proc/*/task/*/stat (no new read): threads, processes, zombies by parent.
  printf '%s\n' "$CPU_TA" | awk '
    function take(line,   p, k, r, rest, f, h) {
      if (line == "") return
      p = 0; r = line
      while ((k = index(substr(r, p + 1), ")")) > 0) p += k
      rest = substr(line, p + 2); split(rest, f, " ")
      split(line, h, "/"); threads++
      c = substr(line, index(line, "(") + 1); c = substr(c, 1, p - index(line, "(") - 1); gsub(/[ \t]/, "_", c)
      if (h[3] != h[5]) return
      procs++; comm[h[3]] = c
      if (f[1] == "Z") { zombies++; z[f[2]]++ }
    }
    {
      k = index($0, ":"); fl = substr($0, 1, k - 1)
      if (fl == last) { rec = rec "?" substr($0, k + 1); next }
      take(rec); rec = $0; last = fl
    }
    END {
      take(rec)
      print "threads=" threads + 0; print "processes=" procs + 0; print "zombies=" zombies + 0
      for (i = 1; i <= 3; i++) {
        best = ""; for (pp in z) if (best == "" || z[best] < z[pp]) best = pp
        if (best == "") break
        print "zombie_parent", best, z[best], (best in comm ? comm[best] : "?"); delete z[best]
      }
    }'
  return 0
}

s_disk() {
  # Space and inodes of the filesystems a node writes to: one df for each, rows in argument order.
  set --
  for p in / /var /var/log /var/lib/containerd /var/lib/docker /var/lib/kubelet; do [ -d "$p" ] && set -- "$@" "$p"; done
  printf 'paths=%s\n' "$*"
  echo '--- blocks'
  capture_or_fail "df -P -k" within 5 df -P -k "$@" && printf '%s\n' "$CAP"
  echo '--- inodes'
  capture_or_fail "df -P -i" within 5 df -P -i "$@" && printf '%s\n' "$CAP"
  return 0
}

cpu_begin() {
  # First CPU sample, taken before the other sections: the ~1 s window overlaps their work instead of
  # adding a sleep. The probe's own short-lived children are gone by the second sample.
  CPU_T0=$(cut -d' ' -f1 /proc/uptime)
  CPU_A=$(grep '^cpu' /proc/stat)
  CPU_TA=$(grep -H '' /proc/[0-9]*/task/[0-9]*/stat 2>/dev/null)
}

s_cpu() {
  # Second sample at least 1 s after the first; per-core deltas and the threads that ran in between.
  [ -n "$CPU_A" ] || return 1
  n=$(grep -c '^processor' /proc/cpuinfo)
  printf 'ncpu=%s\n' "$n"
  grep -m 1 '^model name' /proc/cpuinfo | sed 's/^model name[[:space:]]*: */model=/'
  rest=$(awk -v t0="$CPU_T0" '{ r = 1.05 - ($1 - t0); if (r > 0) printf "%.2f", r; else print 0 }' /proc/uptime)
  [ "$rest" != 0 ] && sleep "$rest"
  CPU_B=$(grep '^cpu' /proc/stat)
  tb=$(grep -H '' /proc/[0-9]*/task/[0-9]*/stat 2>/dev/null)
  awk -v t0="$CPU_T0" '{ printf "window_s=%.2f\n", $1 - t0 }' /proc/uptime
  echo '--- stat1'; printf '%s\n' "$CPU_A"
  echo '--- stat2'; printf '%s\n' "$CPU_B"
  echo '--- threads'
  CPU_THREADS=$(printf '%s\n@@\n%s\n' "$CPU_TA" "$tb" | awk '
    function parse(line,   p, k, r, rest, f, head) {
      p = 0; r = line
      while ((k = index(substr(r, p + 1), ")")) > 0) p += k
      head = substr(line, 1, p); rest = substr(line, p + 2)
      split(rest, f, " ")
      split(head, h, "/"); PID = h[3]; TID = h[5]
      COMM = substr(head, index(head, "(") + 1); COMM = substr(COMM, 1, length(COMM) - 1)
      TICKS = f[12] + f[13]; SYS = f[13]; CPU = f[37]
    }
    function take(line) {
      if (line == "") return
      parse(line); key = PID "/" TID
      if (!second) { t0[key] = TICKS; s0[key] = SYS; return }
      if (!(key in t0)) return
      d = TICKS - t0[key]
      if (d >= 5) { gsub(/[ \t]/, "_", COMM); print PID, TID, CPU, d, SYS - s0[key], COMM }
    }
    # grep -H prints "FILE:line" per line; a newline inside a thread name (comm) continues the same FILE
    $0 == "@@" { take(rec); rec = ""; last = ""; second = 1; next }
    {
      k = index($0, ":"); f = substr($0, 1, k - 1)
      if (f == last) { rec = rec "?" substr($0, k + 1); next }
      take(rec); rec = $0; last = f
    }
    END { take(rec) }')
  [ -n "$CPU_THREADS" ] && printf '%s\n' "$CPU_THREADS"
  return 0
}

s_cpu_stack() {
  # Opt-in (--deep-cpu): kernel stacks on the core with the most system time in the cpu section's window
  # (and its busiest thread), sampled by perf for 0.5 s at low priority; top kernel functions, capped.
  # Status 3 (not available) when perf is missing, not safe to run, or gets no samples.
  if [ "$DEEP_CPU" != 1 ]; then echo requested=0; return 0; fi
  echo requested=1
  pf=$(command -v perf 2>/dev/null)
  [ -n "$pf" ] || { echo 'reason=perf is not installed'; return 3; }
  why=$(exec_refusal "$pf")
  [ -z "$why" ] || { put reason "perf not run: $why"; return 3; }
  core=$(printf '%s\n@@\n%s\n' "$CPU_A" "$CPU_B" | awk '
    $1 == "@@" { second = 1; next }
    $1 ~ /^cpu[0-9]+$/ { if (!second) s0[$1] = $4; else if ($1 in s0 && best < ($4 - s0[$1])) { best = $4 - s0[$1]; c = $1 } }
    END { if (c != "") print substr(c, 4) }')
  case $core in ''|*[!0-9]*) echo 'reason=no per-core CPU samples to pick a hot core'; return 3 ;; esac
  tid=$(printf '%s\n' "$CPU_THREADS" | awk -v c="$core" '$3 == c && best < $5 { best = $5; t = $2 } END { print t }')
  case $tid in *[!0-9]*) tid= ;; esac
  put core "$core"
  [ -n "$tid" ] && put busiest_tid "$tid"
  # --synth=no (perf >= 5.x): no events synthesized for every task on the host (seconds on a busy one);
  # kernel symbols are resolved from kallsyms anyway. Runs at the probe's own low priority: perf's ~1 s
  # of start-up can take many seconds on a busy host, hence a 20 s bound around a 0.5 s sample.
  synth=
  "$pf" record -h 2>&1 | grep -q -e '--synth' && synth=--synth=no
  out=$(within 20 "$pf" record -q -B -N $synth -e cpu-clock -F 499 -g -C "$core" -o - -- sleep 0.5 2>/dev/null |
    within 20 "$pf" script -i - -F ip,sym,dso 2>/dev/null | awk '
    function flush(  f) {
      if (n) { samples++; if (leaf != "") { ks++; self[leaf]++ }; for (f in seen) incl[f]++; memcg += memcg_hit }
      n = 0; leaf = ""; memcg_hit = 0; split("", seen)
    }
    NF == 0 { flush(); next }
    { n++; if ($NF == "([kernel.kallsyms])" && NF >= 3) { f = substr($2, 1, 120); if (leaf == "") leaf = f; seen[f] = 1 } }
    NF >= 3 && $NF == "([kernel.kallsyms])" && ($2 ~ /mem_cgroup|memcg|^memory_stat|^memory_numa_stat/) { memcg_hit = 1 }
    END {
      flush(); print "samples=" samples + 0; print "kernel_samples=" ks + 0; print "memcg_samples=" memcg + 0
      for (f in self) print "self", self[f], f
      for (f in incl) print "incl", incl[f], f
    }' | sort -k1,1 -k2,2nr | awk '$1 != last { c = 0; last = $1 } ++c <= 20')
  case $NL$out$NL in
    *"${NL}samples=0$NL"*) echo 'reason=perf took no samples (not permitted here, or did not finish in 20 s at low priority)'; return 3 ;;
  esac
  printf '%s\n' "$out"
  return 0
}

s_packages() {
  if has dpkg-query && [ -d /var/lib/dpkg ]; then
    echo "manager=dpkg"
    stream_or_fail installed_rows "dpkg-query -W" \
      within 20 dpkg-query -W -f='${db:Status-Abbrev}\t${Package}\t${Version}\t${Architecture}\n'
  elif has rpm; then
    echo "manager=rpm"
    stream_or_fail cat "rpm -qa" within 30 rpm -qa --qf '%{NAME}\t%{VERSION}-%{RELEASE}\t%{ARCH}\n'
  else
    return 3
  fi
}

installed_rows() { # installed_rows < dpkg-query -W rows: the installed ones; `!unparsable` once for any other line
  awk -F'\t' 'NF && NF != 4 { if (!bad++) print "!unparsable"; next } $1 ~ /^ii/ { print $2 "\t" $3 "\t" $4 }'
}

cpu_begin
run meta s_meta
run identity s_identity
run cloudinit s_cloudinit
run imds s_imds
run os s_os
run kernel s_kernel
run sysctl s_sysctl
run systemd_version s_systemd_version
run unit_files s_unit_files
run units s_units
run restart_journal s_restart_journal
run cgroups s_cgroups
sec binaries; s_binaries "$@"; end binaries "$?"
run eks s_eks
run ecs s_ecs
run hygiene s_hygiene
run network s_network
run kernel_log s_kernel_log
run unit_limits s_unit_limits
run config s_config
run kernels s_kernels
run gpu s_gpu
run proc s_proc
run disk s_disk
run cpu s_cpu
run cpu_stack s_cpu_stack
run packages s_packages
sec cost; times; end cost 0  # CPU the probe spent here: shell, then children (user sys)
printf '@@AMI-AUDITOR-DONE %s@@\n' "$NONCE"
exit 0
