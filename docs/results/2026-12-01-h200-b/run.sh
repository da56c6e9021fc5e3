#!/usr/bin/env bash
# Device call: the agreement test of 0b15a70 (rounding noise modelled on f32 accumulation, P = 8).
set -u
out="$OUT"; carry=gpu-carry; bin=$carry/bin
site=/opt/torch/.venv/lib/python3.12/site-packages/nvidia
export LD_LIBRARY_PATH="$site/cudnn/lib:$site/cu13/lib:${LD_LIBRARY_PATH:-}"
export CASTOR_TUNING_CACHE=/tmp/castor-tuning; mkdir -p $CASTOR_TUNING_CACHE
log=$out/tests.txt; : >$log
echo "== agreement, cuda $(date +%T)" >>$log
timeout 200 $bin/castor_cuda_tests $carry/plans --steps 3 >$out/agreement.txt 2>&1; echo "agreement exit $?" >>$log
grep -v 'ms/step\|tuning:' $out/agreement.txt | sed 's/  ints.*  / /' >>$log
for f in lr bn-bias; do timeout 120 $bin/castor_cuda_tests $carry/plans --steps 3 --plant $f >$out/planted_$f.txt 2>&1; echo "planted $f: exit $? (must be 1), failing comparisons $(grep -c ' FAIL$' $out/planted_$f.txt) of 20, smallest worst ratio $(grep -o 'allowed [0-9.]*' $out/planted_$f.txt | awk '{print $2}' | sort -g | head -1)" >>$log; done
echo "== noisy CPU under test $(date +%T)" >>$log
for s in 101 102 103; do timeout 60 $bin/castor_cuda_tests $carry/plans --steps 3 --device cpu-noisy:$s >/tmp/n.txt 2>&1; echo "cpu-noisy:$s exit $?: $(grep -c ' FAIL$' /tmp/n.txt) of 10 comparisons fail; worst $(grep -o 'allowed [0-9.]* ([^)]*)' /tmp/n.txt | sort -k2 -g | tail -1)" >>$log; done
echo "== end $(date +%T)" >>$log
cat $log
