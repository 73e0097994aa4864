// Package queue holds the two small containers the rest of the module
// shares: Heap, a min-heap of values by key, and Ring, a growable ring
// buffer used as a FIFO or a LIFO (a double-ended queue).
//
// Both are typed by generics rather than built on container/heap or a
// slice of interfaces, which box every element into an allocation; both
// keep their storage when they shrink, so once a queue has reached its
// working size, pushing and popping allocate nothing. Neither is safe
// for concurrent use.
//
// It lives in internal, on the module's bottom floor, because its users
// sit on every floor: the packet engine (splice) and its links, the
// scheduler (sched), the simulator and the tools. Under sched it made the
// packet engine import a folder of the scheduler's. It imports nothing of
// the module.
package queue
