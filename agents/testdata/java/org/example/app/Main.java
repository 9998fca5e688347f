package org.example.app;

import java.util.ArrayList;
import java.util.List;
import java.util.function.ToDoubleFunction;
import org.example.shapes.Circle;
import org.example.shapes.Polygon;
import org.example.shapes.Shape;

/**
 * Runs for the given milliseconds (default 1500) over shapes of two
 * classes through an interface and a lambda, then prints a checksum. After
 * the given warm-up milliseconds (second argument) it prints "ready", so a
 * test can attach an agent to methods compiled before it came.
 */
public class Main {
    static double total(List<Shape> shapes, ToDoubleFunction<Shape> f) {
        double t = 0;
        for (Shape s : shapes) {
            t += f.applyAsDouble(s);
        }
        return t;
    }

    public static void main(String[] args) throws Exception {
        long run = args.length > 0 ? Long.parseLong(args[0]) : 1500;
        long warm = args.length > 1 ? Long.parseLong(args[1]) : -1;
        List<Shape> shapes = new ArrayList<>();
        for (int i = 0; i < 64; i++) {
            shapes.add(i % 2 == 0 ? new Circle(i + 1) : new Polygon(3 + i % 29, i + 1));
        }
        long start = System.currentTimeMillis();
        boolean ready = false;
        double sum = 0;
        while (System.currentTimeMillis() - start < run) {
            sum += total(shapes, Shape::area);
            sum += total(shapes, s -> s.perimeter() / 2);
            if (!ready && warm >= 0 && System.currentTimeMillis() - start >= warm) {
                System.out.println("ready");
                System.out.flush();
                ready = true;
            }
        }
        System.out.println(sum > 0 ? "done" : "impossible");
    }
}
