package diff

import (
	"github.com/gpurr/gpurr/recording"
)

// Follow says how a pair that parted ways after leader, the pair that parted first in time,
// may only have followed it: ranks wait on each other's collectives, and a collective hands
// every rank the others' values. a is the pair's run A. The collective is the pair's first
// divergent launch when it is one, else the first collective its run A made after leader's
// divergence (by the wall clock) and before its own; nil when there is none.
func Follow(leader, pair *PairReport, a *Run) (*Followed, error) {
	d, lead := pair.Divergence, leader.Divergence
	if d == nil || lead == nil || pair == leader {
		return nil, nil
	}
	f := &Followed{Pair: pair.shortLabel(), Leader: leader.shortLabel()}
	if IsCollective(d.Kernel) {
		f.Seq, f.Kernel = d.SeqA, d.Kernel
		return f, nil
	}
	var seqs []uint64
	for _, l := range a.Launches {
		if l.Seq >= d.SeqA {
			break
		}
		if IsCollective(a.KernelName(l)) {
			seqs = append(seqs, l.Seq)
		}
	}
	info := a.Process.Info
	err := orderedUpTo(a.Process, seqs, func(r *recording.LaunchRecord) error {
		if info.GetStartUnixNs()+int64(r.Launch.GetHostNs())-int64(info.GetStartNs()) < lead.WallNs {
			return nil
		}
		f.Seq, f.Kernel = r.Launch.GetSeq(), a.KernelNameOf(r.Launch.GetKernelId())
		return recording.ErrStop
	})
	if err != nil || f.Seq == 0 {
		return nil, err
	}
	return f, nil
}

// orderedUpTo is Process.Ordered of seqs that stops once the last one is delivered, rather
// than read the recording to its end; nothing is read for none.
func orderedUpTo(p *recording.Process, seqs []uint64, fn func(*recording.LaunchRecord) error) error {
	if len(seqs) == 0 {
		return nil
	}
	last := seqs[len(seqs)-1]
	_, err := p.Ordered(seqs, func(r *recording.LaunchRecord) error {
		if err := fn(r); err != nil {
			return err
		}
		if r.Launch.GetSeq() == last {
			return recording.ErrStop
		}
		return nil
	})
	return err
}
