# Data mining: flow sizes of a data-mining cluster, Greenberg et al., "VL2: A Scalable and
# Flexible Data Center Network", ACM SIGCOMM 2009 (its flow-size distribution), in the
# tabulation datacenter simulations use (CONGA, Alizadeh et al., SIGCOMM 2014; PIAS, Bai et al.,
# NSDI 2015). Heavy-tailed: half the flows are at most 1.1 KB, 2 % are 100 MB to 1 GB. Mean
# 12.7 MB under linear interpolation.
#
# size_bytes cumulative_probability
0 0
180 0.10
216 0.20
560 0.30
900 0.40
1100 0.50
1870 0.60
3160 0.70
10000 0.80
400000 0.90
3160000 0.95
100000000 0.98
1000000000 1
