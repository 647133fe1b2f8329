//! The records weir keeps in its store, one kind a file: the done and dead
//! records of tickets, the records of graphs and their runs, assets'
//! materializations, and the keys of them all (run ids included). They
//! are data, shared by the actors that write and read them; no actor lives
//! here.

pub mod asset;
pub mod done;
pub mod graph;
pub mod keys;
pub mod pause;
pub mod sla;
