//! `kuota serve` as the queue controller: jobs held, admitted, preempted and finished.
