"""The outbox room: the relay (dispatcher and publisher), the broker feed, the broker itself.

relay.py moves due jobs of outbox-mode queues into the outbox and publishes its events;
feed.py consumes them into a worker's slots; broker.py is RabbitMQ (the only module importing
aio_pika). See docs/outbox.md.
"""
