-- release.lua: release(ks, tok, channel, key, shared) frees lease ks[1] if
-- tok holds it, or, shared (shared is '1'), takes reader tok out of it, and
-- takes tok out of the queue. If the key is then free (or held by readers,
-- and the head waiter would share), publishes key, followed by NUL and the
-- first live waiter if it is exclusive, on channel, or on channel .. ':' ..
-- that waiter's store id when its store listens: only that waiter may take
-- the key, so only its store's clients wake.
-- ks[1..6]: lease, queue, queue expiries, queue channels, readers, their
-- holders (see acquire.lua).
-- Returns 1 when released, 0 when tok did not hold the key.
local function release(ks, tok, channel, key, shared)
  local lk, q, qx, qc, rk, rh = unpack(ks, 1, 6)
  local lease = redis.call('GET', lk)
  if lease then
    decode(lease, lk)
  end
  local readers = lease and string.byte(lease) == 0
  local mine, m = false, tok
  if shared == '1' then
    m = '\0' .. tok
    mine = readers and (tonumber(redis.call('ZSCORE', rk, tok)) or 0) > select(2, clock())
    if mine then
      redis.call('ZREM', rk, tok)
      redis.call('HDEL', rh, tok)
      lease = reseat(lk, rk, rh, string.match(lease, '^%z(%d+)%z'), select(2, clock())) and lease
    end
  elseif lease and string.sub(lease, 1, #tok + 1) == tok .. '\0' then
    mine, lease = true, false
    redis.call('DEL', lk)
  end
  local left, head = false, nil
  if redis.call('EXISTS', q) == 1 then
    left = redis.call('ZREM', q, m) == 1
    redis.call('ZREM', qx, m)
    redis.call('HDEL', qc, m)
    for _, w in ipairs(redis.call('ZRANGEBYSCORE', qx, '-inf', select(2, clock()))) do
      redis.call('ZREM', q, w)
      redis.call('ZREM', qx, w)
      redis.call('HDEL', qc, w)
    end
    head = redis.call('ZRANGE', q, 0, 0)[1]
  end
  local res = mine and 1 or 0
  local exclusive = head and string.byte(head) ~= 0
  if not (mine or left) or lease and not (readers and head and not exclusive) then
    return res
  end
  announce(qc, head, channel, key)
  return res
end

-- drop tells whether tok holds lease lk, whose value is v (not nil), for a
-- batch that releases it with no queue (releasemany.lua): 1 if it does (the
-- batch deletes it and announces), else 0.
local function drop(lk, v, tok)
  return decode(v, lk) == tok and 1 or 0
end
