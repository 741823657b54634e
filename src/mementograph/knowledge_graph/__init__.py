"""The knowledge graph: schema values, stores, the memento engine, entities, recall and pages."""

from ._schema import (
    DEFAULT_NAMESPACE,
    BlockRecord,
    EntityRecord,
    Eviction,
    MementoRecord,
    Mention,
    PageRecord,
    SessionEvent,
    SessionRecord,
    StoreStats,
    block_id_for,
    entity_id_for,
    item_id,
    item_ids,
    memento_id_for,
    page_id_for,
)

__all__ = (
    'DEFAULT_NAMESPACE',
    'BlockRecord',
    'EntityRecord',
    'Eviction',
    'MementoRecord',
    'Mention',
    'PageRecord',
    'SessionEvent',
    'SessionRecord',
    'StoreStats',
    'block_id_for',
    'entity_id_for',
    'item_id',
    'item_ids',
    'memento_id_for',
    'page_id_for',
)
