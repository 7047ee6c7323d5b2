"""Week 1, day 4: cuda::pipeline — N-stage producer/consumer buffering."""
