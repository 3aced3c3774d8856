-- The server key of step callbacks: PUT /api/v3/output-data and PUT
-- /api/v3/step-completion need a per-attempt token, an HMAC of the
-- attempt's step_instance_uuid with this key, which only the attempt's job
-- receives (docs/security.md, "Step callbacks"). The key never leaves the
-- database except to the engine and the API; it is made here, once, from
-- the server's strong random source.

-- +goose Up
CREATE TABLE step_callback_key (
    id          smallint    PRIMARY KEY CHECK (id = 1),
    key         bytea       NOT NULL CHECK (octet_length(key) >= 32),
    create_time timestamptz NOT NULL DEFAULT now()
);
INSERT INTO step_callback_key (id, key)
VALUES (1, uuid_send(gen_random_uuid()) || uuid_send(gen_random_uuid()) || uuid_send(gen_random_uuid()));

-- +goose Down
DROP TABLE step_callback_key;
