"""The schema table: every message kraft speaks, parsed once at import."""

from kraft.protocol.schema import SchemaTable, parse
from kraft.protocol.tables import admin, data_plane, groups, headers, metadata_records, quorum, transactions, txn_markers

TABLE = SchemaTable()
for _module in (headers, data_plane, groups, admin, quorum, metadata_records, transactions, txn_markers):
    parse(_module.SCHEMA, TABLE)
