"""Pigeon's order of master claims (``group.claim_key``, ``election.Election.on_Claim``) against a small model,
step by step (issue 46).

Members of one group hear claims in any order, more than once, from their masters or passed on by others.
The model, written from the paper's rule as the docs give it (a later epoch wins, then the earliest
declaration, then the lowest rank), says after every step which claim each member holds and whom it told
of a better one; and once every member has heard every claim, all hold the same, the best (one master).
"""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from fedemu.actors.pigeon.group import claim_key
from fedemu.actors.pigeon.election import Election
from fedemu.actors.pigeon.messages import Claim

MEMBERS = (1, 2, 3)  # the members under test: never named master, so none of them takes the role
OTHER = 200  # a sender that passes a claim on (a distributor, another member)
GROUP = 0


def master_of(rank: int) -> int:
    return 100 + rank


class Config:
    group = GROUP


class Member(Election):
    """A group member without a fabric: it records what it sends."""

    def __init__(self, ident: int) -> None:
        self.id = ident
        self.now = 0
        self.sent: list = []
        self._member_init(Config(), ident)
        self.member_ids, self.dist_ids = (master_of(0), *MEMBERS), (OTHER,)
        self._adopt(Claim(GROUP, 0, 0, 0, master_of(0), -1))  # as every member starts

    def send(self, dst: int, msg) -> None:
        self.sent.append((dst, msg))


def better(a: Claim, b: Claim) -> bool:
    """The paper's order, rule by rule."""
    if a.epoch != b.epoch:
        return a.epoch > b.epoch
    if a.declared_us != b.declared_us:
        return a.declared_us < b.declared_us
    return a.rank < b.rank


def same_declaration(a: Claim, b: Claim) -> bool:
    return (a.epoch, a.declared_us, a.rank) == (b.epoch, b.declared_us, b.rank)


CLAIMS = st.builds(lambda e, d, r, s: Claim(GROUP, e, d, r, master_of(r), s), st.integers(0, 1),
                   st.sampled_from([0, 10]), st.integers(0, 2), st.sampled_from([-1, *MEMBERS]))


class ClaimMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.members = {m: Member(m) for m in MEMBERS}
        self.declared: list[Claim] = [Claim(GROUP, 0, 0, 0, master_of(0), -1)]
        self.held = {m: self.declared[0] for m in MEMBERS}  # the model
        self.told = {m: [] for m in MEMBERS}

    def _deliver(self, member: int, claim: Claim, src: int) -> None:
        self.members[member].now += 1
        self.members[member].on_Claim(claim, src)
        held = self.held[member]
        if better(claim, held):
            self.held[member] = claim
        elif same_declaration(claim, held):
            if src == claim.master:  # the master itself: its second may have changed
                self.held[member] = claim
        else:  # a stale claim: the sender is told the better one
            self.told[member].append((src, held))

    @rule(claim=CLAIMS)
    def declare(self, claim):
        """A master declares (or a master changes its second): the claim is now in flight."""
        self.declared.append(claim)

    @precondition(lambda self: self.declared)
    @rule(data=st.data(), member=st.sampled_from(MEMBERS), from_master=st.booleans())
    def deliver(self, data, member, from_master):
        claim = data.draw(st.sampled_from(self.declared))
        self._deliver(member, claim, claim.master if from_master else OTHER)

    @rule(data=st.data())
    def everyone_hears_everything(self, data):
        """Every claim reaches every member, from its master, in any order: then one master for all."""
        for member in MEMBERS:
            for claim in data.draw(st.permutations(self.declared)):
                self._deliver(member, claim, claim.master)
        best = self.declared[0]
        for claim in self.declared:
            best = claim if better(claim, best) else best
        for member in self.members.values():
            assert same_declaration(member.claim, best), (member.id, member.claim, best)

    @invariant()
    def each_member_is_the_model(self):
        for m, member in self.members.items():
            assert member.claim == self.held[m]
            assert member.key == claim_key(self.held[m])
            assert member.sent == self.told[m]
            assert member.role is None


TestClaimOrder = ClaimMachine.TestCase
TestClaimOrder.settings = settings(max_examples=80, stateful_step_count=30, deadline=None, database=None)
