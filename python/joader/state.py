"""A job's state_dict(): its keys, how one is made, and the checks a resume makes of one.

joader.Loader and joader.torch.DataLoader both save and restore through this module, so that
their states are the same dict (a state saved by one resumes the other) and are checked alike:

    {"dataset": NAME, "epoch": E, "consumed": [ids of epoch E already yielded],
     "fingerprint": F, "dataset_items": N,       # the dataset's item list when it was saved
     "augment_seed": S}                          # only for a job that augments

A state is plain data (ints, strings, a list), so it can be saved with torch.save, json or pickle.
"""
import numbers

DATASET = "dataset"
EPOCH = "epoch"
CONSUMED = "consumed"
FINGERPRINT = "fingerprint"
DATASET_ITEMS = "dataset_items"
AUGMENT_SEED = "augment_seed"


def identity(info):
    """What a state records of its dataset (info: Client.dataset()'s dict): the fingerprint of its
    item list (paths, labels and sizes; see docs/PYTHON.md) and its item count."""
    return {FINGERPRINT: info["fingerprint"], DATASET_ITEMS: info["items"]}


def make(dataset, epoch, consumed, dataset_identity, augment_seed=None):
    """A state: `consumed` are the ids of epoch `epoch` already yielded."""
    state = {DATASET: dataset, EPOCH: int(epoch), CONSUMED: [int(i) for i in consumed], **dataset_identity}
    if augment_seed is not None:
        state[AUGMENT_SEED] = augment_seed
    return state


def check_resumable(state, dataset_identity, dataset, what):
    """Refuses a state saved against another item list than the dataset's now (ValueError): the
    consumed ids would name other files. States without a fingerprint (older ones) pass."""
    saved = state.get(FINGERPRINT)
    if saved is not None and saved != dataset_identity[FINGERPRINT]:
        then = state.get(DATASET_ITEMS)
        raise ValueError(
            f"state was saved when dataset '{dataset}' listed {then if then is not None else 'other'} items "
            f"(fingerprint {saved}); it now lists {dataset_identity[DATASET_ITEMS]} (fingerprint "
            f"{dataset_identity[FINGERPRINT]}): its files changed, so the item ids the state holds would name other "
            f"files. Resume on the unchanged files, or make a new {what} without a state to start over")


def position(state, dataset, dataset_identity, what):
    """(epoch, consumed ids) of a state given to a `what` (a "Loader", a "DataLoader") of
    `dataset`, after checking that it is one of this module's states for that dataset and its
    unchanged item list (ValueError or TypeError naming what is wrong)."""
    if not isinstance(state, dict):
        raise TypeError(f"a state must be the dict a {what}'s state_dict() gave, not {type(state).__name__}")
    missing = [k for k in (EPOCH, CONSUMED) if k not in state]
    if missing:
        raise ValueError(f"the state has no {' and no '.join(repr(k) for k in missing)}: it is not a {what}'s "
                         "state_dict()")
    if state.get(DATASET) not in (None, dataset):
        raise ValueError(f"the state is for dataset '{state[DATASET]}', not '{dataset}'")
    check_resumable(state, dataset_identity, dataset, what)
    epoch = state[EPOCH]
    if isinstance(epoch, bool) or not isinstance(epoch, numbers.Integral) or epoch < 0:
        raise ValueError(f"the state's epoch must be an integer >= 0, not {epoch!r}")
    consumed = state[CONSUMED]
    if isinstance(consumed, (str, bytes)) or not hasattr(consumed, "__iter__"):
        raise TypeError(f"the state's consumed must be a list of item ids, not {type(consumed).__name__}")
    return int(epoch), [int(i) for i in consumed]


def augment_seed(given, state):
    """The augment_seed a job uses: the one given, else the state's (a resumed job gets the draws
    it would have got), else None (a fresh one)."""
    if given is None and state is not None:
        return state.get(AUGMENT_SEED)
    return given
