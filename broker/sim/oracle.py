"""What the data-plane simulation checks: the committed truth and the invariants.

``truth`` is every record below a high watermark some leader has reached, by offset, as
``(write id, index in batch)``; a write id is unique per logical write (retries of it
reuse it), carried in the batch's timestamp.  The checks (each names the broker):

* no committed record is lost while an ISR member survives: a leader's log holds the
  truth; when it does not, some broker that was in the ISR when the lost records were
  committed, and has not lost power since, must be missing too (else the loss is the
  one Kafka allows: every ISR member lost its unsynced writes, and the truth is cut back);
* replicas never diverge below the high watermark: every replica's log below its own HW
  (and from its log start: DeleteRecords moves it) is the truth, and a leader's HW passes only records each maximal-ISR member holds;
* an acknowledged acks=all write is in every ISR member's log when it is answered;
* the high watermark never goes backwards on a leader (one leadership of one process);
* idempotent retries never duplicate: no idempotent write id twice in the truth (unless
  the first copy was below the leader's log start: DeleteRecords ends idempotence there);
* consumers never see past the high watermark: what a consumer read is the truth.
"""

from __future__ import annotations

from bisect import bisect_right


class InvariantViolation(AssertionError):
    pass


def record_ids(log, lo: int, hi: int) -> list[tuple[int, int]]:
    """``(write id, index)`` of the offsets ``[lo, hi)`` of ``log`` (a ``MemLog``)."""
    out = []
    batches = log.batches
    for i in range(max(bisect_right(batches, lo, key=_base) - 1, 0), len(batches)):
        h = batches[i][0]
        if h.base_offset >= hi:
            break
        for o in range(max(h.base_offset, lo), min(h.base_offset + h.last_offset_delta + 1, hi)):
            out.append((h.max_timestamp, o - h.base_offset))
    return out


def _base(batch) -> int:
    return batch[0].base_offset


class Oracle:
    def __init__(self, idempotent_ids: set[int]) -> None:
        self.truth: list[tuple[int, int]] = []
        self.seen_ids: dict[int, int] = {}  # idempotent write id -> its offset in the truth
        self.idempotent_ids = idempotent_ids
        self.durable_upto: dict[int, int] = {}  # broker -> truth prefix it holds as an ISR member
        self.hw_seen: dict[tuple[int, int, int], int] = {}  # (broker, incarnation, epoch) -> HW
        self.cut_back = 0  # truth cuts after a loss Kafka allows
        self.cut_epoch = -1  # the leader epoch that made the last cut
        self.written_at: dict[int, float] = {}  # write id -> when a leader first appended it

    # ---------------------------------------------------------------- committing

    def on_leader_hw(self, leader, hw: int) -> bool:
        """Leader ``leader`` (a SimBroker) has high watermark ``hw``: extend the truth.
        True when the HW moved since the last call for this leadership."""
        key = (leader.id, leader.incarnation, leader.partition.state.leader_epoch)
        last = self.hw_seen.get(key, -1)
        if hw < last:
            raise InvariantViolation(f"b{leader.id}: leader high watermark went back {last} -> {hw}")
        self.hw_seen[key] = hw
        if key[2] < self.cut_epoch:
            return False  # a leadership from before an allowed loss: its HW is history
        n = len(self.truth)
        if hw <= n:
            return hw != last
        new = record_ids(leader.disk.log, n, hw)
        if len(new) != hw - n:
            raise InvariantViolation(f"b{leader.id}: high watermark {hw} past its log end")
        for wid, index in new:
            if index == 0 and wid in self.idempotent_ids:
                if self.seen_ids.get(wid, -1) >= leader.disk.log.log_start_offset:
                    raise InvariantViolation(f"idempotent write {wid} committed twice "
                                             f"(again at offset {len(self.truth)})")
                # (Below the log start it is allowed: the leader forgets a producer whose
                # batches are all deleted, as Kafka does, and then takes a late retry anew.)
                self.seen_ids[wid] = len(self.truth)
            self.truth.append((wid, index))
        return True

    def holds(self, broker, hi: int) -> bool:
        """Whether ``broker``'s log is the truth up to ``hi`` (from its log start: what
        DeleteRecords removed is no longer anyone's to hold)."""
        log = broker.disk.log
        lo = max(hi - 1, log.log_start_offset)
        return log.log_end_offset >= hi and (lo >= hi or record_ids(log, lo, hi) == self.truth[lo:hi])

    def check_isr_holds(self, leader, brokers, heard) -> None:
        """The leader's HW just moved: every maximal-ISR member whose last fetch (the one
        the leader counted) came after its last power loss holds the log up to the HW; they
        are then durable holders of that prefix.  (One that lost power since may hold less,
        and the leader cannot know yet.)"""
        st = leader.partition.state
        hw = st.high_watermark
        self.durable_upto[leader.id] = max(self.durable_upto.get(leader.id, 0), hw)
        for b in st.maximal_isr:
            if b == leader.id:
                continue
            follower = brokers[b]
            if heard.get((leader.id, b)) != follower.power_losses:
                continue  # it lost power since its last fetch: the leader cannot know yet
            if not self.holds(follower, hw):
                raise InvariantViolation(f"b{leader.id} has high watermark {hw} but ISR member "
                                         f"b{b} holds only {follower.disk.log.log_end_offset} offsets"
                                         f" (or others)")
            self.durable_upto[b] = max(self.durable_upto.get(b, 0), hw)

    def on_power_loss(self, broker_id: int) -> None:
        self.durable_upto[broker_id] = 0

    # ---------------------------------------------------------------- checks

    def check_leader_complete(self, leader, isr, log_trace) -> None:
        """A new leader holds every committed record, unless no member of the ISR
        (``isr``, the controller's) that held them survives."""
        n = len(self.truth)
        log = leader.disk.log
        start = log.log_start_offset  # below it, records were deleted on purpose
        if start >= n:
            return
        have = record_ids(log, start, min(n, log.log_end_offset))
        if len(have) == n - start and have == self.truth[start:]:
            return
        first_bad = start + next((i for i, (a, b) in enumerate(zip(have, self.truth[start:])) if a != b),
                                 len(have))
        holders = sorted(b for b, upto in self.durable_upto.items()
                         if upto > first_bad and b != leader.id and b in isr)
        if self.durable_upto.get(leader.id, 0) > first_bad or holders:
            raise InvariantViolation(
                f"b{leader.id} leads epoch {leader.partition.state.leader_epoch} without committed "
                f"offset {first_bad} (truth has {n}); surviving ISR members holding it: "
                f"{holders or [leader.id]}")
        log_trace(f"committed offsets {first_bad}..{n - 1} lost: every ISR member that held them "
                  f"lost power (allowed); truth cut back")
        del self.truth[first_bad:]
        self.seen_ids = {wid: o for o, (wid, i) in enumerate(self.truth) if i == 0 and wid in self.idempotent_ids}
        self.cut_back += 1
        self.cut_epoch = leader.partition.state.leader_epoch

    def check_replica(self, broker) -> None:
        """Below its own HW a replica's log is the truth."""
        hw = broker.partition.state.high_watermark
        if hw > len(self.truth):
            if self.cut_back:
                return  # an HW from before an allowed loss; the next fetch truncates it
            raise InvariantViolation(f"b{broker.id}: high watermark {hw} beyond the committed "
                                     f"{len(self.truth)} offsets")
        if hw and not self.holds(broker, hw):
            if self.cut_back:
                return
            raise InvariantViolation(f"b{broker.id} diverges below its high watermark {hw}")

    def check_acked(self, leader, brokers, first: int, last: int) -> None:
        """An acks=all write at ``first..last`` is being acknowledged by ``leader`` (maybe
        a retry, answered with the offsets the write got first): every maximal-ISR member
        holds it, but one that lost power since the write was first appended."""
        whole = record_ids(leader.disk.log, first, last + 1)
        since = self.written_at.get(whole[0][0], 0.0) if whole else 0.0
        for b in leader.partition.state.maximal_isr:
            broker = brokers[b]
            if b != leader.id and broker.lost_power_at >= since:
                continue
            # What DeleteRecords removed from either log since is not compared.
            lo = max(first, leader.disk.log.log_start_offset, broker.disk.log.log_start_offset)
            if record_ids(broker.disk.log, lo, last + 1) != record_ids(leader.disk.log, lo, last + 1):
                raise InvariantViolation(f"b{leader.id} acknowledges acks=all offsets {first}..{last}"
                                         f" that ISR member b{b} does not hold")

    def check_consumed(self, offset: int, ids: list[tuple[int, int]], source: int) -> None:
        if offset + len(ids) > len(self.truth) or self.truth[offset:offset + len(ids)] != ids:
            if self.cut_back:
                return
            raise InvariantViolation(f"a consumer read offsets {offset}..{offset + len(ids) - 1} "
                                     f"from b{source} past what is committed ({len(self.truth)})")
