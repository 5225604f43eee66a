# ami-auditor probe: static, read-only POSIX sh (dash/bash/busybox). Sent on stdin, run once.
# Its first line, added by the scanner, is `AMI_NONCE=<32 hex>`: a per-run secret every marker carries
# (auditor/collect/framing.py), so nothing a host prints can open, close or replace a section.
# It audits only the live host it runs on (images are read in Python, confined to their root:
# auditor/collect/image_sections.py). Arguments: [--exec-versions] [--deep-cpu] then names or absolute paths of key
# binaries (validated by the caller); any other option (such as the retired --root DIR) is refused like a
# missing nonce: nothing on stdout, status 64.
# Binaries are fingerprinted, never run, unless --exec-versions (then only root-owned, root-only-writable
# files in a root-only-writable directory chain; see exec_refusal).
# Prints sections:  @@AMI-AUDITOR-SECTION <nonce> name@@ ... @@AMI-AUDITOR-END <nonce> name rc=N@@
# Never writes anything, never reads root memory.stat/memory.numa_stat (they walk dying memcgs).
# No host-controlled string is ever program text (sed/awk/grep patterns, printf formats, eval), and a
# host value printed inside a section never starts a line of its own (`one`/`put` fold newlines to `?`).
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PATH LC_ALL=C
N=${AMI_NONCE:-}
unset AMI_NONCE  # never passed on to the programs the probe runs
case $N in *[!0-9a-f]*|'') N=bad ;; esac
if [ "${#N}" -ne 32 ]; then
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
renice -n 19 -p $$ >/dev/null 2>&1
ionice -c 3 -p $$ >/dev/null 2>&1
umask 077

if command -v timeout >/dev/null 2>&1; then
  T() { timeout -k 1 "$@"; }
else
  T() { shift; "$@"; }
fi
has() { command -v "$1" >/dev/null 2>&1; }
sec() { printf '@@AMI-AUDITOR-SECTION %s %s@@\n' "$N" "$1"; }
end() { printf '\n@@AMI-AUDITOR-END %s %s rc=%s@@\n' "$N" "$1" "$2"; }  # own line even after unterminated output
oneline() { # oneline TEXT: TEXT with its newlines shown as `?` (no newline added)
  case $1 in *"$NL"*) printf '%s' "$1" | tr '\n' '?' ;; *) printf '%s' "$1" ;; esac
}
one() { oneline "$1"; echo; }  # one TEXT: TEXT as exactly one line
put() { printf '%s=' "$1"; one "$2"; }  # put KEY VALUE: one `KEY=VALUE` line, whatever VALUE holds
UNIT_FILES=
CPU_A=
CPU_B=
CPU_TA=
CPU_THREADS=
CPU_T0=0
run() { # run NAME FUNC: one bounded section, stderr kept out of the parsed stream
  sec "$1"; "$2"; end "$1" "$?"
}
catf() { [ -r "$1" ] && cat "$1"; }
kv() { # kv KEY CMD...: one `KEY=value` line whatever CMD prints (trailing newlines dropped, others `?`)
  _k=$1; shift; _v=$("$@" 2>/dev/null); put "$_k" "$_v"
}

s_meta() {
  echo "probe_version=1"
  put uid "$(id -u)"
  put shell "$(readlink /proc/$$/exe 2>/dev/null)"
  printf 'date_epoch='; date +%s
}

s_identity() {
  kv hostname catf /proc/sys/kernel/hostname
  kv boot_id catf /proc/sys/kernel/random/boot_id
  kv uptime catf /proc/uptime
  kv machine_id catf /etc/machine-id
  printf 'image_id_file='; (catf /etc/image-id | tr '\n' ' '); echo
}

s_cloudinit() { catf /run/cloud-init/instance-data.json; }

s_imds() {
  # IMDSv2 with a short timeout; only when curl exists. Prints key=value lines.
  has curl || return 3
  tok=$(T 3 curl -s -f -m 1 -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 60' \
        http://169.254.169.254/latest/api/token 2>/dev/null) || return 4
  for k in instance-id ami-id instance-type placement/availability-zone \
           placement/availability-zone-id placement/region; do
    v=$(T 3 curl -s -f -m 1 -H "X-aws-ec2-metadata-token: $tok" \
        "http://169.254.169.254/latest/meta-data/$k" 2>/dev/null) && put "$k" "$v"
  done
  return 0
}

s_os() { catf /etc/os-release || catf /usr/lib/os-release; }

s_kernel() {
  kv release uname -r
  kv version uname -v
  kv machine uname -m
  kv cmdline catf /proc/cmdline
  kv thp_enabled catf /sys/kernel/mm/transparent_hugepage/enabled
  kv thp_defrag catf /sys/kernel/mm/transparent_hugepage/defrag
  catf /proc/meminfo | meminfo_kv
  printf 'nvidia_driver=%s\n' "$(catf /proc/driver/nvidia/version 2>/dev/null | head -n 1)"
}

meminfo_kv() { # meminfo_kv < /proc/meminfo: `hugepages_total=N` and `mem_total_kb=N` (empty when absent)
  awk '/^HugePages_Total:/ {h = $2} /^MemTotal:/ {m = $2} END {print "hugepages_total=" h; print "mem_total_kb=" m}'
}

s_sysctl() {
  # One grep over the chosen set: prints /proc/sys/PATH:VALUE lines.
  cd /proc/sys 2>/dev/null || return 3
  grep -H '' kernel/pid_max kernel/threads-max kernel/panic kernel/numa_balancing \
    vm/swappiness vm/max_map_count vm/overcommit_memory vm/min_free_kbytes \
    vm/dirty_ratio vm/dirty_background_ratio vm/zone_reclaim_mode \
    net/core/somaxconn net/core/netdev_max_backlog net/core/rmem_max net/core/wmem_max \
    net/ipv4/ip_forward net/ipv4/tcp_keepalive_time net/ipv4/ip_local_port_range \
    net/netfilter/nf_conntrack_max net/bridge/bridge-nf-call-iptables \
    fs/file-max fs/inotify/max_user_watches fs/inotify/max_user_instances 2>/dev/null
  cd / || return 3
  return 0
}

booted() { has systemctl && [ -d /run/systemd/system ]; }

s_systemd_version() {
  has systemctl || return 3
  v=$(T 5 systemctl --version) || return $?  # hung (124) or failing: an error, never "no version"
  printf '%s\n' "$v" | head -n 1
}

s_unit_files() {
  booted || return 3
  UNIT_FILES=$(T 10 systemctl list-unit-files --no-legend --no-pager 2>/dev/null); rc=$?  # reused by s_units
  printf '%s\n' "$UNIT_FILES"
  case $rc in 124|137) return "$rc" ;; esac  # cut off by its timeout: the list is partial
}

s_units() {
  # Runtime state of loaded services/sockets/timers plus enabled unit files, in one `show` call.
  booted || return 3
  {
    T 10 systemctl list-units --all --no-legend --no-pager --plain \
      --type=service,socket,timer,mount,path 2>/dev/null | awk '{print $1}'
    printf '%s\n' "$UNIT_FILES" | awk '$2 == "enabled" {print $1}'
  } | grep -v '@\.' | grep -v '^$' | sort -u | tr '\n' '\0' | T 20 xargs -0 -r systemctl show \
    -p Id,Description,LoadState,ActiveState,SubState,Result,NRestarts,Restart,ExecMainPID \
    -p ExecMainStatus,ExecMainCode,ExecMainStartTimestampMonotonic,ActiveEnterTimestampMonotonic \
    -p FragmentPath,UnitFileState,UnitFilePreset,Type,StartLimitBurst --
}

s_restart_journal() {
  # Restart evidence from PID 1's journal this boot (the only source on systemd < 235).
  has journalctl || return 3
  T 10 journalctl -b -q --no-pager -o cat _PID=1 2>/dev/null | restart_tally
  return 0
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
  printf 'fstype='; stat -fc %T /sys/fs/cgroup 2>/dev/null || echo
  printf 'unified_fstype='; stat -fc %T /sys/fs/cgroup/unified 2>/dev/null || echo
  echo '--- proc_cgroups'
  catf /proc/cgroups
  echo '--- v1_live'
  # v1 hierarchies only (they have a `tasks` file); one walk for all, following the top-level links
  # (cpu -> cpu,cpuacct) with -H. O(live cgroups); never touches memory.stat.
  v1=
  for c in memory pids cpu cpuacct blkio devices freezer cpuset; do
    [ -f "/sys/fs/cgroup/$c/tasks" ] && v1="$v1 $c"
  done
  if [ -n "$v1" ]; then
    # shellcheck disable=SC2086  # $v1 is a list of fixed controller names
    (cd /sys/fs/cgroup && T 20 find -H $v1 -type d 2>/dev/null) | awk -F/ '{n[$1]++} END {for (c in n) print c, n[c]}'
  fi
  echo '--- v2_stat'
  if [ -r /sys/fs/cgroup/cgroup.stat ]; then
    for f in /sys/fs/cgroup/cgroup.stat /sys/fs/cgroup/*.slice/cgroup.stat \
             /sys/fs/cgroup/kubepods*/cgroup.stat; do
      [ -r "$f" ] || continue
      one "@ ${f#/sys/fs/cgroup/}"
      cat "$f"
    done
    echo '--- v2_controllers'
    catf /sys/fs/cgroup/cgroup.controllers
  fi
  return 0
}

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
  grep -v -e '^diversion by ' -e '^local diversion ' | head -n 1 | sed 's/: .*//'
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
    rp=$(readlink -f "$p" 2>/dev/null)
    put realpath "$rp"
    put stat "$(stat -Lc '%s %Y %d %i %a %U' "$p" 2>/dev/null)"
    put sha256 "$(T 20 sha256sum < "$p" 2>/dev/null | cut -d' ' -f1)"
    v= src=none
    if has dpkg-query && [ -d /var/lib/dpkg ]; then
      # one query for the path, its merged-/usr twin and its resolved target
      case $p in /usr/*) tw=${p#/usr} ;; *) tw=/usr$p ;; esac
      o=$(T 10 dpkg-query -S "$p" "$tw" "${rp:-$p}" 2>/dev/null | dpkg_owner_of)
      if [ -n "$o" ]; then
        put dpkg_owner "$o"
        o=${o%%,*}
        v=$(T 10 dpkg-query -W -f='${Version}' -- "$o" 2>/dev/null | head -n 1)
        put dpkg_version "$v"
      fi
    fi
    if has rpm; then
      o=$(T 10 rpm -qf --qf '%{NAME}\t%{VERSION}-%{RELEASE}\t%{VENDOR}\n' "$p" 2>/dev/null | head -n 1)
      case $o in
        *"not owned"*|"") ;;
        *) put rpm_owner "$o"; o=${o#*"	"}; v=${o%%"	"*} ;;
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
          nvidia-smi) ev=$(T 5 "$rp" --version 2>&1 | grep -i 'driver version' | head -n 1) ;;
          *) ev=$(T 3 "$rp" --version 2>&1 | head -n 1) ;;
        esac
        [ -n "$ev" ] && v=$ev && src=exec
      fi
    fi
    put version "$v"
    printf 'version_source=%s\n' "$src"
    [ -n "$why" ] && put version_refused "$why"
    n=${p##*/}
    nre=$(printf '%s' "$n" | sed 's/[.+]/[&]/g')  # the validated name as a literal in the ERE below
    for f in /var/log/cloud-init-output.log /var/lib/cloud/instance/user-data.txt \
             /var/lib/cloud/instance/scripts/* /etc/eks/release /var/log/user-data.log; do
      [ -r "$f" ] || continue
      fq=$(oneline "$f" | tr ' ' '?')  # a host-chosen file name: data only, one field
      T 5 grep -ohE "(https?|s3)://[^ \"'<>]*/$nre([.][A-Za-z0-9]+)?([ \"'<>]|\$)" "$f" 2>/dev/null |
        head -n 5 | while IFS= read -r u; do printf 'url=%s %s\n' "$fq" "$u"; done
    done
  done
  return 0
}

s_eks() { catf /etc/eks/release; return 0; }

ecs_exits() { # ecs_exits < ecs-init.log: how many `Agent exited with code N` lines (ecs-init's supervisor
  # loop, engine.go), then `last_exit=` the newest one
  awk '/Agent exited with code/ {n++; last = $0} END {print n + 0; if (n) print "last_exit=" last}'
}

s_ecs() {
  if [ -r /etc/ecs/ecs.config ]; then
    echo "config_present=1"
    grep -E '^[[:space:]]*ECS_CLUSTER=' /etc/ecs/ecs.config | tail -n 1 | sed 's/^[[:space:]]*/cluster_line=/'
  else
    echo "config_present=0"
  fi
  for f in /var/log/ecs/ecs-init.log /var/log/ecs/ecs-init.log.*; do
    [ -r "$f" ] || continue
    printf 'log='; oneline "$f"; printf ' '
    ecs_exits < "$f"
  done
  if has docker; then
    T 5 docker inspect -f 'agent_started={{.State.StartedAt}} agent_status={{.State.Status}} agent_restarts={{.RestartCount}}' ecs-agent 2>/dev/null
  fi
  return 0
}

s_hygiene() {
  # What an image must not carry (rules/image.yaml), as metadata only: paths, sizes, counts, kinds and
  # host key fingerprints (of the public half). No private key, history, credential or token content is
  # ever printed: greps here only answer yes/no (-q) or a count (-c). Paths come last on a line, one line.
  echo "image=0"
  printf 'cloud_instances='; ls -A /var/lib/cloud/instances 2>/dev/null | wc -l
  m=absent
  if [ -f /etc/machine-id ]; then
    case $(head -c 64 /etc/machine-id 2>/dev/null | head -n 1 | tr -d ' \t') in
      '') m=empty ;; uninitialized) m=uninitialized ;; *) m=populated ;;
    esac
  fi
  printf 'machine_id_state=%s\n' "$m"
  for f in /etc/ssh/ssh_host_*_key; do
    [ -f "$f" ] || continue
    t=${f##*/ssh_host_}; t=${t%_key}
    b=$(head -c 65536 "$f.pub" 2>/dev/null | awk 'NR == 1 {print $2; exit}')
    case $b in
      ''|*[!A-Za-z0-9+/=]*) fp=- ;;
      *) fp=$(printf '%s' "$b" | base64 -d 2>/dev/null | sha256sum | cut -d' ' -f1) ;;
    esac
    printf 'key\t%s\t%s\t' "$(oneline "$t" | tr '\t' ' ')" "$fp"; one "$f"
  done
  for f in /root/.ssh/authorized_keys /root/.ssh/authorized_keys2; do
    [ -f "$f" ] || continue
    printf 'authorized\t%s\t' "$(grep -cvE '^[[:space:]]*(#|$)' "$f" 2>/dev/null)"; one "$f"
  done
  for h in /root /home/*; do
    [ -d "$h" ] || continue
    for n in .bash_history .zsh_history .ash_history .sh_history .python_history .mysql_history \
             .psql_history .lesshst .viminfo; do
      [ -f "$h/$n" ] || continue
      printf 'history\t%s\t' "$(stat -c '%s' "$h/$n" 2>/dev/null)"; one "$h/$n"
    done
    [ -s "$h/.aws/credentials" ] && { printf 'credential\taws-credentials\t'; one "$h/.aws/credentials"; }
    [ -f "$h/.aws/config" ] && head -c 1048576 "$h/.aws/config" |
      grep -qiE '^[[:space:]]*aws_(secret_access_key|session_token)[[:space:]]*=' &&
      { printf 'credential\taws-credentials\t'; one "$h/.aws/config"; }
    [ -s "$h/.netrc" ] && { printf 'credential\tnetrc\t'; one "$h/.netrc"; }
    [ -s "$h/.git-credentials" ] && { printf 'credential\tgit-credentials\t'; one "$h/.git-credentials"; }
    [ -s "$h/.pgpass" ] && { printf 'credential\tpgpass\t'; one "$h/.pgpass"; }
    [ -f "$h/.docker/config.json" ] && head -c 1048576 "$h/.docker/config.json" | grep -q '"auth"' &&
      { printf 'credential\tdocker-auth\t'; one "$h/.docker/config.json"; }
  done
  for f in /etc/environment /etc/default/* /etc/sysconfig/* /etc/profile.d/*.sh /etc/ecs/ecs.config; do
    [ -f "$f" ] || continue
    head -c 1048576 "$f" 2>/dev/null | grep -qE 'A(KI|SI)A[0-9A-Z]{16}' &&
      { printf 'credential\taws-access-key-id\t'; one "$f"; }
    head -c 1048576 "$f" 2>/dev/null |
      grep -qE '^[[:space:]]*(export[[:space:]]+)?[A-Z0-9_]*(SECRET|TOKEN|PASSWORD|PASSWD|API_KEY|AUTH_DATA)[A-Z0-9_]*[[:space:]]*=[[:space:]]*[^[:space:]]' &&
      { printf 'credential\tsecret-variable\t'; one "$f"; }
  done
  for d in /var/cache/apt /var/lib/apt/lists /var/cache/yum /var/cache/dnf; do
    [ -d "$d" ] || continue
    printf 'cache\t%s\t' "$(T 10 du -sk "$d" 2>/dev/null | cut -f1)"; one "$d"
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
    drv=$(basename "$(readlink "$i/device/driver/module" 2>/dev/null)" 2>/dev/null)
    one "@ $n driver=${drv:-none} operstate=$(catf "$i/operstate") mtu=$(catf "$i/mtu")"
    [ -n "$drv" ] || continue
    if has ethtool; then
      T 3 ethtool -i "$n" 2>/dev/null | info_lines
      T 3 ethtool -S "$n" 2>/dev/null | stat_lines
    fi
  done
  printf 'ena_module_version='; catf /sys/module/ena/version || echo
  return 0
}

s_kernel_log() {
  # Driver trouble only (ENA resets, watchdogs, OOM), newest last, bounded.
  if has journalctl && T 10 journalctl -k -b -q --no-pager -o short-monotonic 2>/dev/null | trouble_lines; then
    return 0
  fi
  T 10 dmesg 2>/dev/null | trouble_lines
  return 0
}

trouble_lines() { # trouble_lines < kernel log: the newest 200 lines naming driver trouble
  pat='TX q [0-9]* is paused|napi handler hasn.t been called|Keep alive watchdog timeout|Trigger reset is on|Reset the device|Device reset completed|ena .*[Rr]eset|NETDEV WATCHDOG|[Oo]ut of memory[^:]*: Kill|soft lockup|hung_task|blocked for more than'
  grep -E "$pat" | tail -n 200
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
  out=$(T 20 "$pf" record -q -B -N $synth -e cpu-clock -F 499 -g -C "$core" -o - -- sleep 0.5 2>/dev/null |
    T 20 "$pf" script -i - -F ip,sym,dso 2>/dev/null | awk '
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
    T 20 dpkg-query -W -f='${db:Status-Abbrev}\t${Package}\t${Version}\t${Architecture}\n' 2>/dev/null |
      awk -F'\t' '$1 ~ /^ii/ {print $2 "\t" $3 "\t" $4}'
  elif has rpm; then
    echo "manager=rpm"
    T 30 rpm -qa --qf '%{NAME}\t%{VERSION}-%{RELEASE}\t%{ARCH}\n' 2>/dev/null
  else
    return 3
  fi
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
run cpu s_cpu
run cpu_stack s_cpu_stack
run packages s_packages
sec cost; times; end cost 0  # CPU the probe spent here: shell, then children (user sys)
printf '@@AMI-AUDITOR-DONE %s@@\n' "$N"
exit 0
