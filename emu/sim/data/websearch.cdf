# Web search: flow sizes of a production web-search cluster, Alizadeh et al., "Data Center TCP
# (DCTCP)", ACM SIGCOMM 2010 (its flow-size distribution of background and query traffic), in
# the tabulation datacenter simulations use (HPCC, Li et al., ACM SIGCOMM 2019; pFabric, PIAS).
# Mean 1.71 MB under linear interpolation.
#
# size_bytes cumulative_probability
0 0
10000 0.15
20000 0.20
30000 0.30
50000 0.40
80000 0.53
200000 0.60
1000000 0.70
2000000 0.80
5000000 0.90
10000000 0.97
30000000 1
