# Dumps every DAMON region (R <uptime> <start> <end> <nr_accesses> <age>)
# once per aggregation for 85 s, under one kdamond set up as vmscope sets
# it, while `workload hotset` runs 64 MiB hot in 256 MiB (128 MiB after
# 45 s). Run: cargo xtask kernels --kernel 6.12 --script xtask/scripts/damon-regions.sh
# (docs/working-set.md has the rules compared on its output).
K=/sys/kernel/mm/damon/admin/kdamonds
(sleep 45; echo hot 128M) | vmscope workload hotset --size 256M --hot 64M --seconds 95 > /tmp/hs.out 2>&1 &
sleep 1
HP=$(pidof vmscope)
echo "HP $HP"
while ! grep -q ready /tmp/hs.out; do sleep 1; done
cat /tmp/hs.out
grep -v ' 0 0 ' /proc/$HP/maps
echo 1 > $K/nr_kdamonds
echo 1 > $K/0/contexts/nr_contexts
C=$K/0/contexts/0
echo vaddr > $C/operations
echo 100000 > $C/monitoring_attrs/intervals/sample_us
echo 1000000 > $C/monitoring_attrs/intervals/aggr_us
echo 1000000 > $C/monitoring_attrs/intervals/update_us
echo 1000 > $C/monitoring_attrs/nr_regions/max
echo 100 > $C/monitoring_attrs/nr_regions/min
echo 1 > $C/targets/nr_targets
echo $HP > $C/targets/0/pid_target
echo 1 > $C/schemes/nr_schemes
S=$C/schemes/0
echo stat > $S/action
for w in sz nr_accesses age; do echo 4294967295 > $S/access_pattern/$w/max; echo 0 > $S/access_pattern/$w/min; done
echo on > $K/0/state
echo "ON $(cat /proc/uptime)"
i=0
while [ $i -lt 85 ]; do
  echo update_schemes_tried_regions > $K/0/state
  T=$(cut -d' ' -f1 /proc/uptime)
  grep -r . $S/tried_regions/ | awk -F'[/:]' -v t=$T '{n=NF; k=$(n-2); f=$(n-1); v[k","f]=$n; ks[k]=1} END {for (k in ks) if (v[k",start"]!="") print "R", t, v[k",start"], v[k",end"], v[k",nr_accesses"], v[k",age"]}'
  grep -E '"hot"|hot' /tmp/hs.out | tail -1
  i=$((i+1))
done
echo off > $K/0/state
echo 0 > $K/nr_kdamonds
cat /tmp/hs.out
