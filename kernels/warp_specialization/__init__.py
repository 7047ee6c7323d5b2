"""Week 2, day 2: warp specialization (full/empty mbarrier rings, a producer warp, setmaxnreg)."""
