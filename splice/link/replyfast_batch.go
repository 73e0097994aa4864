package link

import (
	"errors"
	"runtime"
	"unsafe"

	"github.com/qsplice/qsplice/splice/wire"
	"golang.org/x/sys/unix"
)

// A pass's commands for the reply fast path in two system calls.
//
// Every spliced connection costs the shim at least two map updates with
// echoes on (the Put its Splice makes, the Delete its end makes), more
// when it handles a reply itself; one bpf(2) call each was more than
// half of the shim's system calls under wrk's 1K close load (2.05 a
// connection; docs/results.md, twenty-sixth session).
// BPF_MAP_DELETE_BATCH and BPF_MAP_UPDATE_BATCH (Linux 5.6) apply a whole
// pass's worth in one call each. The Deletes go first: of a
// connection's commands in one pass the caller keeps only the last Put
// (each supersedes the one before), so a Delete of a key always comes
// before its Put in the pass, and applying every Delete before every
// Put keeps each connection's order. A kernel or map without the batch
// commands gets one call per command, as before.

// FastPathBatch collects commands for ReplyFastPath.Apply. One per
// worker, used by one at a time; once grown it allocates nothing.
type FastPathBatch struct {
	delKeys []wire.FastPathKey
	putKeys []wire.FastPathKey
	putVals [][cfgSize]byte
	scratch FastPathScratch // for the one-by-one fallback
}

// Reset empties b, keeping its room.
func (b *FastPathBatch) Reset() {
	b.delKeys, b.putKeys, b.putVals = b.delKeys[:0], b.putKeys[:0], b.putVals[:0]
}

// Put adds a Put of e for k. The caller puts a key at most once a batch,
// after its Deletes (see the top of this file).
func (b *FastPathBatch) Put(k wire.FastPathKey, e wire.FastPathEntry) {
	b.putKeys = append(b.putKeys, k)
	b.putVals = append(b.putVals, [cfgSize]byte{})
	encodeFastPathEntry(b.putVals[len(b.putVals)-1][:], e)
}

// Delete adds a Delete of k.
func (b *FastPathBatch) Delete(k wire.FastPathKey) { b.delKeys = append(b.delKeys, k) }

// Len is the number of commands in b.
func (b *FastPathBatch) Len() int { return len(b.delKeys) + len(b.putKeys) }

// mapBatchAttr is the bpf(2) attribute of the batch commands (union
// bpf_attr's batch: in_batch, out_batch, keys, values, count, map_fd,
// elem_flags, flags).
type mapBatchAttr struct {
	inBatch, outBatch uint64
	keys, values      uint64
	count, mapFD      uint32
	elemFlags, flags  uint64
}

// Apply applies b's Deletes, then its Puts: one system call for each
// kind, more only past a command that fails. A Delete of an entry that
// is not there is no failure. It reports how many commands failed, and
// the first failure's error; the others are applied all the same.
func (f *ReplyFastPath) Apply(b *FastPathBatch) (failed int, err error) {
	if f.noBatch.Load() {
		return f.applyOneByOne(b)
	}
	first := true
	note := func(e error) {
		failed++
		err = firstErr(err, e)
	}
	for dels := b.delKeys; len(dels) > 0; {
		n, e := f.batch(unix.BPF_MAP_DELETE_BATCH, unsafe.Pointer(&dels[0]), nil, len(dels))
		if first && e != nil && n == 0 && batchUnsupported(e) {
			f.noBatch.Store(true)
			return f.applyOneByOne(b)
		}
		first = false
		if e == nil {
			break
		}
		// dels[n] failed; the ones after it were not tried.
		if e != unix.ENOENT {
			note(e)
		}
		dels = dels[n+1:]
	}
	for puts, vals := b.putKeys, b.putVals; len(puts) > 0; {
		n, e := f.batch(unix.BPF_MAP_UPDATE_BATCH, unsafe.Pointer(&puts[0]), unsafe.Pointer(&vals[0]), len(puts))
		if first && e != nil && n == 0 && batchUnsupported(e) {
			f.noBatch.Store(true)
			return f.applyOneByOne(b) // no Delete to apply again: first
		}
		first = false
		if e == nil {
			break
		}
		note(e)
		puts, vals = puts[n+1:], vals[n+1:]
	}
	runtime.KeepAlive(b)
	return failed, err
}

// applyOneByOne applies b's commands one system call each.
func (f *ReplyFastPath) applyOneByOne(b *FastPathBatch) (failed int, err error) {
	for _, k := range b.delKeys {
		if e := f.Delete(&b.scratch, k); e != nil {
			failed++
			err = firstErr(err, e)
		}
	}
	for i := range b.putKeys {
		b.scratch.key, b.scratch.val = b.putKeys[i], b.putVals[i]
		if e := f.update(&b.scratch); e != nil {
			failed++
			err = firstErr(err, e)
		}
	}
	return failed, err
}

func firstErr(first, next error) error {
	if first != nil {
		return first
	}
	return next
}

// batch runs one batch command on the config map over n keys (and
// values), and returns how many it applied before it stopped.
func (f *ReplyFastPath) batch(cmd uintptr, keys, values unsafe.Pointer, n int) (int, error) {
	attr := mapBatchAttr{keys: uint64(uintptr(keys)), values: uint64(uintptr(values)), count: uint32(n), mapFD: uint32(f.config.FD())}
	_, _, errno := unix.Syscall(unix.SYS_BPF, cmd, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
	if errno != 0 {
		return min(int(attr.count), n-1), errno
	}
	return n, nil
}

// batchUnsupported reports whether a batch command failed because the
// kernel or the map does not have it (before Linux 5.6, or a map type
// without it: EINVAL, or the kernel's ENOTSUPP, 524), not on an element.
func batchUnsupported(err error) bool {
	return errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.Errno(524))
}
