-- The engine nodes that are alive: each renews its row on every heartbeat
-- round, and every node divides the flow groups by the nodes whose rows
-- have not expired (engine/flow/share.go), so that each holds about
-- groups / nodes. A node that stops cleanly deletes its row; a dead one's
-- row expires with its leases.

-- +goose Up
CREATE TABLE engine_node (
    node_id      text COLLATE "C" PRIMARY KEY,
    started_at   timestamptz NOT NULL DEFAULT now(),
    heartbeat_at timestamptz NOT NULL,
    expires_at   timestamptz NOT NULL
);

-- +goose Down
DROP TABLE engine_node;
