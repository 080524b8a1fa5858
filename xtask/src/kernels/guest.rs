//! The guest's `/init`: a busybox shell script that runs the core suite
//! inside the booted kernel and prints every output between markers on the
//! serial console, where the host reads them back (`checks.rs`). All the
//! judging happens on the host; the guest only runs things.
//!
//! Markers, each on a line of its own:
//! - `@@vmscope:start RELEASE` once the kernel is up;
//! - `@@vmscope:begin NAME` ... `@@vmscope:end NAME RC` around one output
//!   (a command's stdout with its exit status, or a file with 0);
//! - `@@vmscope:done` at the end.

/// Size of each workload, kept small: under TCG the guest runs many times
/// slower than the host.
pub const FAULT_PAGES: u64 = 20_000;
pub const GUP_PAGES: u64 = 5_000;
pub const MADVISE_CALLS: u64 = 200;
pub const PERF_PAGES: u64 = 10_000;
/// Written twice in a `SWAP_LIMIT_MIB` cgroup: out to swap, then back in.
pub const SWAP_PAGES: u64 = 40_000;
pub const SWAP_LIMIT_MIB: u64 = 64;
pub const FORK_CHILDREN: u64 = 3;
/// Processes in a row, each writing `SHORT_PAGES` twice in the same
/// cgroup: each a new mm, often at the address of the one before.
pub const SHORT_LIVED: u64 = 20;
pub const SHORT_PAGES: u64 = 18_000;
pub const RMAP_SIZE_MIB: u64 = 16;
pub const RMAP_SHARERS: u64 = 64;
/// Faulted by one child in each of two cgroup v2 groups, `a` and `b`.
pub const CGROUP_A_PAGES: u64 = 20_000;
pub const CGROUP_B_PAGES: u64 = 8_000;
/// Touched in `o/in`, a cgroup without a limit inside `o` limited to
/// `OOM_LIMIT_MIB` without swap: a memcg OOM at `o`'s limit.
pub const OOM_LIMIT_MIB: u64 = 32;
pub const OOM_MEMCG_PAGES: u64 = 32_768;
/// Touched with swap off in `g`, a cgroup without a limit: more than the
/// guest's 2 GiB, a system-wide OOM. The child's `oom_score_adj` of 1000
/// makes it the victim.
pub const OOM_GLOBAL_PAGES: u64 = 1 << 20;
/// `workload mmap-lock`: faults per thread (two threads), without and with
/// the mprotect storm, recorded with `--mmap-lock`.
pub const MMAP_LOCK_FAULTS: u64 = 20_000;
/// `workload compaction` sized for the guest's 2 GiB.
pub const COMPACTION_FILL_MIB: u64 = 256;
pub const COMPACTION_HUGE_MIB: u64 = 32;

/// A zram device of this size read twice through the page cache.
pub const PAGE_CACHE_MIB: u64 = 64;
pub const PAGE_CACHE_PAGES: u64 = PAGE_CACHE_MIB * 256;
/// The limit of cgroup /pe, which reads another such device cold: reclaim
/// evicts three quarters of it.
pub const EVICT_LIMIT_MIB: u64 = PAGE_CACHE_MIB / 4;

/// Huge pages the test child faults for THP by size.
pub const THP_HUGE: u64 = 32;

/// `workload hotset` for the working set, sized for the guest's 2 GiB.
pub const WSS_SIZE_MIB: u64 = 512;
pub const WSS_HOT_MIB: u64 = 128;
/// `wssm` and the lab: size, hot set and the hot set grown, in MiB (small:
/// every fill is slow under TCG).
pub const WSS_M: (u64, u64, u64) = (256, 64, 128);
/// `wss2`: the size and hot set (MiB) of a workload in `/w1` and one in
/// `/w2`, measured system-wide.
pub const WSS_TWO: [(u64, u64); 2] = [(256, 64), (256, 128)];

/// The modules the guest loads for zram swap: zram itself, whose `depends=`
/// the host follows (zsmalloc, and on 6.12 the lz4/lz4hc libraries), and
/// the compressors older kernels request by name through the crypto API at
/// run time (6.1's default is lzo-rle), which no dependency names. A module
/// a kernel lacks, or builds in, is skipped.
pub const MODULE_ROOTS: &[&str] = &["lzo", "lzo_rle", "lz4", "lz4hc", "zram"];

/// What every guest runs first: the mounts, and the shell functions the
/// suite (and a `--script`) can use.
const PREAMBLE: &str = r#"#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
mount -t cgroup2 cgroup2 /sys/fs/cgroup
mount -t tmpfs tmpfs /tmp
ip link set lo up 2>/dev/null || ifconfig lo 127.0.0.1 up
cd /tmp
T=/bin/vmscope-testchild
begin() { echo "@@vmscope:begin $1"; }
end() { echo; echo "@@vmscope:end $1 $2"; }
# section NAME CMD...: CMD's stdout between markers, its stderr's tail after.
section() {
    name=$1; shift
    begin $name
    "$@" 2>/tmp/err
    rc=$?
    end $name $rc
    begin $name.stderr
    tail -n 5 /tmp/err
    end $name.stderr 0
}
show() { begin $1; cat $2; end $1 0; }
# vmscope detaches in a child after it exits; let that finish before the
# next step, so that the kernel patches its code (fentry) while the guest
# is quiet: under TCG, patching code that the other vCPU is running now and
# then leaves it a stale int3 (an oops at handle_mm_fault+5).
settle() { n=0; while [ $n -lt 150 ] && pidof vmscope >/dev/null 2>&1; do sleep 0.2; n=$((n+1)); done; }
rec() { name=$1; shift; section $name vmscope record -i 250ms -o /tmp/$name.json "$@"; settle; show $name.json /tmp/$name.json; }

"#;

/// The script. Modules are in `/mods`, numbered in load order.
pub fn init_script() -> String {
    let suite = format!(
        r#"echo "@@vmscope:start $(uname -r)"
section doctor vmscope doctor --json

rec faults -- $T --report /tmp/faults.ru touch {fault_pages}
show faults.ru /tmp/faults.ru
rec gup -- $T --report /tmp/gup.ru populate {gup_pages}
show gup.ru /tmp/gup.ru
rec madvise -- $T madvise {madvise_calls}
(export VMSCOPE_DISABLE_PROBES=exceptions:page_fault_user; rec perf -- $T --report /tmp/perf.ru touch {perf_pages})
show perf.ru /tmp/perf.ru
section top vmscope top --batch -n 2 -i 500ms
settle

vmscope serve --listen 127.0.0.1:9464 >/tmp/serve.out 2>&1 &
SP=$!
i=0
while [ $i -lt 150 ] && ! wget -q -O /dev/null http://127.0.0.1:9464/healthz 2>/dev/null; do sleep 0.2; i=$((i+1)); done
sleep 1
section serve wget -q -O - http://127.0.0.1:9464/metrics
kill $SP
wait $SP
settle

rec mmaplock0 --mmap-lock -- vmscope workload mmap-lock --storm none --threads 2 --faults {ml_faults} --slice 4M
rec mmaplock1 --mmap-lock -- vmscope workload mmap-lock --storm mprotect --threads 2 --faults {ml_faults} --slice 4M
show thp.enabled /sys/kernel/mm/transparent_hugepage/enabled
rec compaction -- vmscope workload compaction --fill {compaction_fill}M --huge {compaction_huge}M
show pool.after /proc/sys/vm/nr_hugepages
# THP by size: 32 huge pages of MADV_HUGEPAGE memory.
show thp.before /proc/vmstat
rec thp -- $T hugefault {thp_huge}
show thp.after /proc/vmstat
# The working set: a known hot set in more resident memory, two 10 s windows.
rec wss --working-set -- vmscope workload hotset --size {wss_size}M --hot {wss_hot}M --seconds 20
# The same measured by the multi-generational LRU (turned on for it where
# it is off by default), chosen because the scope is a cgroup: the hot set
# grows after the second window. Then the lab checks each method.
LG=$(cat /sys/kernel/mm/lru_gen/enabled 2>/dev/null)
echo y > /sys/kernel/mm/lru_gen/enabled 2>/dev/null
echo +memory > /sys/fs/cgroup/cgroup.subtree_control
mkdir -p /sys/fs/cgroup/w
rec wssm --working-set --cgroup /w -- sh -c "echo \$\$ > /sys/fs/cgroup/w/cgroup.procs && (sleep 21; echo hot {m_grow}M) | exec vmscope workload hotset --size {m_size}M --hot {m_hot}M --seconds 31"
section labwss vmscope lab wss --size {m_size}M --hot {m_hot}M --grow {m_grow}M --window 5s --json
settle
# DAMON, named: a kdamond watches the workload where the kernel has vaddr
# (refused with exit 2 and the reason where not), the first window 30 s
# after it starts; nr_kdamonds afterwards
# says whether vmscope put DAMON's sysfs back as it found it.
rec wssd --working-set --wss-method damon --wss-window 5s -- vmscope workload hotset --size {m_size}M --hot {m_hot}M --seconds 50
section damon.after cat /sys/kernel/mm/damon/admin/kdamonds/nr_kdamonds
# The whole system (nothing followed): every memory cgroup, two hot sets
# in two of them.
mkdir -p /sys/fs/cgroup/w1 /sys/fs/cgroup/w2
# They run until killed: under TCG, vmscope's start-up takes seconds.
sh -c "echo \$\$ > /sys/fs/cgroup/w1/cgroup.procs && exec vmscope workload hotset --size {w1_size}M --hot {w1_hot}M --seconds 300" >/dev/null 2>&1 &
P1=$!
sh -c "echo \$\$ > /sys/fs/cgroup/w2/cgroup.procs && exec vmscope workload hotset --size {w2_size}M --hot {w2_hot}M --seconds 300" >/dev/null 2>&1 &
P2=$!
sleep 4
rec wss2 --working-set -d 25s
kill $P1 $P2
wait
[ -n "$LG" ] && echo $LG > /sys/kernel/mm/lru_gen/enabled

for m in /mods/*.ko; do insmod $m 2>/dev/null; done
begin swapon
echo 1G > /sys/block/zram0/disksize && mkswap /dev/zram0 >/dev/null && swapon /dev/zram0 && echo ok
end swapon $?
echo +memory > /sys/fs/cgroup/cgroup.subtree_control
mkdir -p /sys/fs/cgroup/t
echo {swap_limit}M > /sys/fs/cgroup/t/memory.max
show swap.before /proc/vmstat
rec swap -- sh -c "echo \$\$ > /sys/fs/cgroup/t/cgroup.procs && exec $T rewrite {swap_pages}"
show swap.after /proc/vmstat
# Swap by tier: zswap (where the kernel has it) in front of the zram
# device, the same writer.
echo Y > /sys/module/zswap/parameters/enabled 2>/dev/null
show tiers.before /proc/vmstat
rec tiers -- sh -c "echo \$\$ > /sys/fs/cgroup/t/cgroup.procs && exec $T rewrite {swap_pages}"
show tiers.after /proc/vmstat
echo N > /sys/module/zswap/parameters/enabled 2>/dev/null
show fork.before /proc/vmstat
rec fork -- sh -c "echo \$\$ > /sys/fs/cgroup/t/cgroup.procs && exec $T forkswap {swap_pages} {fork_children} exit"
show fork.after /proc/vmstat
show short.before /proc/vmstat
rec short -- sh -c "echo \$\$ > /sys/fs/cgroup/t/cgroup.procs && i=0 && while [ \$i -lt {short_lived} ]; do $T rewrite {short_pages} || exit 1; i=\$((i+1)); done"
show short.after /proc/vmstat
mkdir -p /sys/fs/cgroup/a /sys/fs/cgroup/b
rec cgroups -- sh -c "sh -c 'echo \$\$ > /sys/fs/cgroup/a/cgroup.procs && exec $T --report /tmp/cga.ru touch {cg_a}' & sh -c 'echo \$\$ > /sys/fs/cgroup/b/cgroup.procs && exec $T --report /tmp/cgb.ru touch {cg_b}' & wait"
show cga.ru /tmp/cga.ru
show cgb.ru /tmp/cgb.ru
# The page cache: a fresh zram device (nothing of it cached) read twice
# through the cache from cgroup /p, cold and then warm. The shell keeps the
# device open in between: a block device's last close drops its cache.
D=$(cat /sys/class/zram-control/hot_add)
echo {pc_mib}M > /sys/block/zram$D/disksize
mkdir -p /sys/fs/cgroup/p
exec 3</dev/zram$D
rec pc1 -- sh -c "echo \$\$ > /sys/fs/cgroup/p/cgroup.procs && exec $T readpass {pc_pages} /dev/zram$D"
rec pc2 --cachestat /dev/zram$D -- sh -c "echo \$\$ > /sys/fs/cgroup/p/cgroup.procs && exec $T readpass {pc_pages} /dev/zram$D"
exec 3<&-
# Evictions: another fresh device read cold from /pe, whose limit holds a
# quarter of it, so that its limit's reclaim evicts as the read goes on.
E=$(cat /sys/class/zram-control/hot_add)
echo {pc_mib}M > /sys/block/zram$E/disksize
mkdir -p /sys/fs/cgroup/pe
echo {evict_limit}M > /sys/fs/cgroup/pe/memory.max
exec 4</dev/zram$E
show pce.before /proc/vmstat
rec pce -- sh -c "echo \$\$ > /sys/fs/cgroup/pe/cgroup.procs && exec $T readpass {pc_pages} /dev/zram$E"
show pce.after /proc/vmstat
exec 4<&-
# record --cgroup on /s while three cgroups are created below it, each given
# one process that moves itself in, and removed.
cat > /tmp/subtree.sh <<'EOF'
for i in 1 2 3; do
    mkdir /sys/fs/cgroup/s/c$i
    sh -c "echo \$\$ > /sys/fs/cgroup/s/c$i/cgroup.procs && exec /bin/vmscope-testchild --report /tmp/sub$i.ru touch {cg_b}"
    rmdir /sys/fs/cgroup/s/c$i
done
EOF
mkdir -p /sys/fs/cgroup/s
rec subtree --cgroup /s -- sh /tmp/subtree.sh
show sub1.ru /tmp/sub1.ru
show sub2.ru /tmp/sub2.ru
show sub3.ru /tmp/sub3.ru

rec rmap64 -- vmscope workload rmap --sharers {rmap_sharers} --size {rmap_size}M
rec rmap1 -- vmscope workload rmap --sharers 1 --size {rmap_size}M
(export VMSCOPE_DISABLE_PROBES=fentry:rmap; rec rmap64s -- vmscope workload rmap --sharers {rmap_sharers} --size {rmap_size}M)
(export VMSCOPE_DUMP_STACKS=/tmp/stacks64m; rec rmap64m --rmap-maintenance -- vmscope workload rmap --sharers {rmap_sharers} --size {rmap_size}M)
begin stacks64m; head -c 60000 /tmp/stacks64m; end stacks64m 0
# The lab: both variants, interleaved, recorded with both methods.
section labrmap vmscope lab rmap -r 2 --sharers {rmap_sharers} --size {rmap_size}M --format json -o /tmp/labrmap
settle

# OOM kills last: a memcg OOM at a parent's limit, then a system-wide one.
mkdir -p /sys/fs/cgroup/o /sys/fs/cgroup/g
echo {oom_limit}M > /sys/fs/cgroup/o/memory.max
echo 0 > /sys/fs/cgroup/o/memory.swap.max
echo +memory > /sys/fs/cgroup/o/cgroup.subtree_control
mkdir -p /sys/fs/cgroup/o/in
rec oommemcg -- sh -c "echo \$\$ > /sys/fs/cgroup/o/in/cgroup.procs && exec $T touch {oom_memcg_pages}"
swapoff /dev/zram0
# Past the guest's memory in one mapping: the default overcommit heuristic refuses it.
echo 1 > /proc/sys/vm/overcommit_memory
rec oomglobal -- sh -c "echo \$\$ > /sys/fs/cgroup/g/cgroup.procs && echo 1000 > /proc/self/oom_score_adj && exec $T touch {oom_global_pages}"

echo "@@vmscope:done"
poweroff -f
"#,
        fault_pages = FAULT_PAGES,
        gup_pages = GUP_PAGES,
        madvise_calls = MADVISE_CALLS,
        perf_pages = PERF_PAGES,
        swap_limit = SWAP_LIMIT_MIB,
        swap_pages = SWAP_PAGES,
        fork_children = FORK_CHILDREN,
        short_lived = SHORT_LIVED,
        short_pages = SHORT_PAGES,
        rmap_size = RMAP_SIZE_MIB,
        rmap_sharers = RMAP_SHARERS,
        cg_a = CGROUP_A_PAGES,
        cg_b = CGROUP_B_PAGES,
        oom_limit = OOM_LIMIT_MIB,
        oom_memcg_pages = OOM_MEMCG_PAGES,
        oom_global_pages = OOM_GLOBAL_PAGES,
        ml_faults = MMAP_LOCK_FAULTS,
        compaction_fill = COMPACTION_FILL_MIB,
        compaction_huge = COMPACTION_HUGE_MIB,
        wss_size = WSS_SIZE_MIB,
        thp_huge = THP_HUGE,
        wss_hot = WSS_HOT_MIB,
        m_size = WSS_M.0,
        m_hot = WSS_M.1,
        m_grow = WSS_M.2,
        w1_size = WSS_TWO[0].0,
        w1_hot = WSS_TWO[0].1,
        w2_size = WSS_TWO[1].0,
        w2_hot = WSS_TWO[1].1,
        pc_mib = PAGE_CACHE_MIB,
        pc_pages = PAGE_CACHE_PAGES,
        evict_limit = EVICT_LIMIT_MIB,
    );
    format!("{PREAMBLE}{suite}")
}

/// A guest that runs `script` instead of the suite, between the start and
/// done markers, with zram's modules loaded.
pub fn script_init(script: &str) -> String {
    format!(
        "{PREAMBLE}for m in /mods/*.ko; do insmod $m 2>/dev/null; done\necho \"@@vmscope:start $(uname -r)\"\n{script}\necho \"@@vmscope:done\"\npoweroff -f\n"
    )
}
